// cudyn nccl — a GrowableBuffer whose chunks stay registered as it grows and shrinks.
#include "cudyn/nccl/registered_growable_buffer.hpp"

#include "core/internal.hpp"
#include "nccl/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kCreate{"NcclRegisteredGrowableBuffer::create"};
constexpr detail::Operation kGrow{"NcclRegisteredGrowableBuffer::grow_to"};
constexpr detail::Operation kShrink{"NcclRegisteredGrowableBuffer::shrink_to"};
constexpr detail::Operation kRelease{"NcclRegisteredGrowableBuffer::release_physical"};
constexpr detail::Operation kRestore{"NcclRegisteredGrowableBuffer::restore"};
constexpr detail::Operation kDeregister{"NcclRegisteredGrowableBuffer::deregister"};

Result<void> require_buffer(const NcclRegisteredGrowableBuffer& buffer, const detail::Operation& operation) {
    if (buffer.empty()) return operation.invalid("the buffer is empty (moved from)");
    return ok();
}

}  // namespace

Result<NcclRegisteredGrowableBuffer> NcclRegisteredGrowableBuffer::create(const NcclCommunicator& communicator,
                                                                          GrowableBuffer buffer,
                                                                          NcclRegistrationKind kind) {
    if (buffer.empty()) return kCreate.invalid("the buffer is empty (moved from)");
    if (communicator.empty()) return kCreate.invalid("the communicator is empty");
    NcclRegisteredGrowableBuffer registered;
    registered.buffer_ = std::move(buffer);
    registered.communicator_ = communicator.state();
    registered.kind_ = kind;
    if (!registered.buffer_.released()) CUDYN_TRY(registered.register_new_chunks(kCreate.name()));
    return registered;
}

NcclRegisteredGrowableBuffer& NcclRegisteredGrowableBuffer::operator=(NcclRegisteredGrowableBuffer&& other) noexcept {
    if (this != &other) {
        (void)deregister_down_to(0);
        registrations_ = std::move(other.registrations_);
        other.registrations_.clear();
        buffer_ = std::move(other.buffer_);
        communicator_ = std::move(other.communicator_);
        kind_ = other.kind_;
    }
    return *this;
}

NcclRegisteredGrowableBuffer::~NcclRegisteredGrowableBuffer() {
    // Last first, each silently (a refusal lets go of that registration);
    // the buffer goes after, with its own wait for the device.
    while (!registrations_.empty()) registrations_.pop_back();
}

Result<void> NcclRegisteredGrowableBuffer::register_new_chunks(const char* operation) {
    const std::size_t first = registrations_.size();
    const std::size_t chunk = buffer_.chunk_size_bytes();
    registrations_.reserve(buffer_.chunk_count());
    for (std::size_t index = first; index < buffer_.chunk_count(); ++index) {
        auto registration = detail::NcclRegistration::create(communicator_, buffer_.device_address() + index * chunk,
                                                             chunk, kind_, operation);
        if (!registration) {
            (void)deregister_down_to(first);
            return std::move(registration).error();
        }
        registrations_.push_back(std::move(*registration));
    }
    return ok();
}

Result<void> NcclRegisteredGrowableBuffer::deregister_down_to(std::size_t target) {
    while (registrations_.size() > target) {
        if (auto gone = registrations_.back().deregister(); !gone) {
            Error error = std::move(gone).error();
            error.message += " (" + std::to_string(registrations_.size()) + " chunk(s) stay registered; retry)";
            return error;
        }
        registrations_.pop_back();
    }
    return ok();
}

Result<void> NcclRegisteredGrowableBuffer::grow_to(std::size_t bytes) {
    CUDYN_TRY(require_buffer(*this, kGrow));
    const std::size_t before = buffer_.size_bytes();
    CUDYN_TRY(buffer_.grow_to(bytes));
    if (auto registered = register_new_chunks(kGrow.name()); !registered) {
        // Back to the previous size: the chunks this call mapped are not registered.
        (void)buffer_.shrink_to(before);
        return registered;
    }
    return ok();
}

Result<void> NcclRegisteredGrowableBuffer::shrink_to(std::size_t bytes) {
    CUDYN_TRY(require_buffer(*this, kShrink));
    if (buffer_.released()) return buffer_.shrink_to(bytes);  // GrowableBuffer's refusal
    const std::size_t chunk = buffer_.chunk_size_bytes();
    const std::size_t keep = bytes / chunk + (bytes % chunk != 0 ? 1 : 0);
    CUDYN_TRY(deregister_down_to(keep));
    return buffer_.shrink_to(bytes);
}

Result<void> NcclRegisteredGrowableBuffer::resize(std::size_t bytes) {
    if (bytes > buffer_.size_bytes()) return grow_to(bytes);
    return shrink_to(bytes);
}

Result<void> NcclRegisteredGrowableBuffer::release_physical(GrowableBuffer::Contents contents) {
    CUDYN_TRY(require_buffer(*this, kRelease));
    CUDYN_TRY(deregister_down_to(0));
    return buffer_.release_physical(contents);
}

Result<void> NcclRegisteredGrowableBuffer::restore() {
    CUDYN_TRY(require_buffer(*this, kRestore));
    if (!buffer_.released()) return ok();
    CUDYN_TRY(buffer_.restore());
    if (auto registered = register_new_chunks(kRestore.name()); !registered) {
        // Released again, the restored bytes saved, so a retry restores and registers.
        (void)buffer_.release_physical(GrowableBuffer::Contents::Save);
        return registered;
    }
    return ok();
}

Result<GrowableBuffer> NcclRegisteredGrowableBuffer::deregister() {
    CUDYN_TRY(require_buffer(*this, kDeregister));
    CUDYN_TRY(deregister_down_to(0));
    communicator_.reset();
    return std::move(buffer_);
}

}  // namespace cudyn
