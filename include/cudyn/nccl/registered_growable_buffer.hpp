// cudyn — a GrowableBuffer registered with an NCCL communicator that stays
// registered as it grows and shrinks. Each chunk is registered on its own (one
// physical allocation per registration, the shape NCCL's VMM registration
// takes): growing maps the new chunks and registers them before it returns,
// shrinking deregisters the chunks that go before they are unmapped, so no
// collective ever sees mapped memory that is not registered, nor a
// registration of unmapped memory. The buffer is moved in and changed only
// through this class; the registrations always go before the memory.
//
// With NcclRegistrationKind::SymmetricWindow every chunk is a window, and
// window registration is collective: every rank grows, shrinks, releases and
// restores its buffer in step (the same sizes, the same order).
// Not thread-safe, like GrowableBuffer.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/nccl_registration.hpp"
#include "cudyn/nccl/communicator.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace cudyn {

class NcclRegisteredGrowableBuffer {
public:
    // Takes `buffer` and registers every chunk it has mapped. On failure the
    // registrations made are given back and the buffer is released with the
    // error. InvalidArgument for an empty buffer or communicator.
    static Result<NcclRegisteredGrowableBuffer> create(const NcclCommunicator& communicator, GrowableBuffer buffer,
                                                       NcclRegistrationKind kind = NcclRegistrationKind::Buffer);

    NcclRegisteredGrowableBuffer() noexcept = default;  // empty; move-only
    NcclRegisteredGrowableBuffer(NcclRegisteredGrowableBuffer&&) noexcept = default;
    NcclRegisteredGrowableBuffer& operator=(NcclRegisteredGrowableBuffer&& other) noexcept;
    ~NcclRegisteredGrowableBuffer();  // deregisters every chunk, then the buffer goes

    // GrowableBuffer::grow_to, then the new chunks are registered. A failure
    // at either step leaves the previous size, registered as before.
    Result<void> grow_to(std::size_t bytes);
    // The chunks past the new size are deregistered, last first, then
    // GrowableBuffer::shrink_to. A refused deregistration stops it there,
    // nothing unmapped (retry); a refused unmap leaves those chunks mapped
    // and unregistered, and a retry unmaps them.
    Result<void> shrink_to(std::size_t bytes);
    Result<void> resize(std::size_t bytes);
    // Deregisters every chunk, then GrowableBuffer::release_physical.
    Result<void> release_physical(GrowableBuffer::Contents contents = GrowableBuffer::Contents::Discard);
    // GrowableBuffer::restore, then every chunk registered again.
    Result<void> restore();

    // Deregisters everything and hands the buffer back.
    Result<GrowableBuffer> deregister();

    const GrowableBuffer& buffer() const noexcept { return buffer_; }
    std::size_t registered_chunks() const noexcept { return registrations_.size(); }
    NcclRegistrationKind kind() const noexcept { return kind_; }
    bool empty() const noexcept { return buffer_.empty(); }

private:
    // Registers chunks [registered_chunks(), buffer_.chunk_count()); on
    // failure deregisters those it added.
    Result<void> register_new_chunks(const char* operation);
    // Deregisters down to `target` chunks, last first.
    Result<void> deregister_down_to(std::size_t target);

    // Members go last to first: the registrations before the buffer.
    GrowableBuffer buffer_;
    std::shared_ptr<detail::NcclCommState> communicator_;
    NcclRegistrationKind kind_ = NcclRegistrationKind::Buffer;
    std::vector<detail::NcclRegistration> registrations_;  // chunk i at buffer_.device_address() + i * chunk size
};

}  // namespace cudyn
