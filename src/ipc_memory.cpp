// cudyn — IpcMemDescriptor: the failures of the export path (the path itself
// is inline in ipc_memory.hpp) and the descriptor's byte form. Also the
// process identity the IPC modules share (process_identity.hpp).
#include "cudyn/ipc_memory.hpp"
#include "cudyn/driver_call.hpp"

#include "wire_format.hpp"

#if defined(_WIN32)
#include <process.h>
#else
#include <pthread.h>
#include <unistd.h>
#endif

#include <atomic>
#include <chrono>
#include <random>
#include <string>

namespace cudyn {

namespace detail {

std::atomic<std::uint64_t> process_token{0};
std::atomic<std::uint64_t> process_pid{0};

namespace {
std::uint64_t current_pid() noexcept {
#if defined(_WIN32)
    return static_cast<std::uint64_t>(::_getpid());
#else
    return static_cast<std::uint64_t>(::getpid());
#endif
}

// getpid() is a system call (hundreds of ns in some VMs) on every export: the
// id is kept, and a fork() child refreshes its copy (pthread_atfork).
#if !defined(_WIN32)
void refresh_pid_after_fork() noexcept { process_pid.store(current_pid(), std::memory_order_relaxed); }
#endif

// Never 0 (0 means "not drawn yet"). Where the system has no random source
// (random_device throws), the clock and a stack address still separate two
// processes that share a pid in different namespaces.
std::uint64_t draw_token() noexcept {
    std::uint64_t token = 0;
    try {
        std::random_device source;
        token = (static_cast<std::uint64_t>(source()) << 32) ^ source();
    } catch (...) {
        const auto now = std::chrono::high_resolution_clock::now().time_since_epoch().count();
        token = static_cast<std::uint64_t>(now) ^ (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&token)) << 20);
    }
    return token != 0 ? token : 1;
}
}  // namespace

// Cold and out of line: its random_device is kilobytes of stack that the
// inline export path should not carry.
CUDYN_DETAIL_COLD ProcessIdentity first_process_identity() noexcept {
    // A function-local static: one thread draws, any other first caller waits.
    static const std::uint64_t token = [] {
        process_pid.store(current_pid(), std::memory_order_relaxed);
#if !defined(_WIN32)
        (void)::pthread_atfork(nullptr, nullptr, refresh_pid_after_fork);
#endif
        const std::uint64_t drawn = draw_token();
        process_token.store(drawn, std::memory_order_release);  // publishes the pid stored above too
        return drawn;
    }();
    return ProcessIdentity{process_pid.load(std::memory_order_relaxed), token};
}

namespace {
// Drawn while the library loads, not inside the first export or open, whose
// cost it would otherwise be (a random_device read: microseconds, against a
// ~35 ns export and a ~40 us open).
const ProcessIdentity drawn_at_load = first_process_identity();
}  // namespace

bool is_this_process(std::uint64_t pid, std::uint64_t token) noexcept {
    const ProcessIdentity self = this_process();
    return pid == self.pid && token == self.token;
}

}  // namespace detail

namespace {
constexpr char kMagic[9] = "CUDYNIPM";
constexpr const char* kWhat = "IpcMemDescriptor";
}  // namespace

// ---- the export path's failures (the path itself is inline in the header) ----------------

Result<IpcMemDescriptor> IpcMemDescriptor::empty_buffer_error() {
    return Error::invalid_argument("IpcMemDescriptor::export_buffer: the buffer is empty (moved from or freed)");
}

Result<IpcMemDescriptor> IpcMemDescriptor::bad_range_error(CUdeviceptr address, std::size_t bytes,
                                                           std::uint64_t offset, std::uint64_t allocation_size) {
    if (address == 0) return Error::invalid_argument("IpcMemDescriptor::export_range: address is null");
    if (bytes == 0) return Error::invalid_argument("IpcMemDescriptor::export_range: bytes must be non-zero");
    return Error::invalid_argument("IpcMemDescriptor::export_range: offset " + std::to_string(offset) + " + " +
                                   std::to_string(bytes) + " bytes runs past the allocation of " +
                                   std::to_string(allocation_size) + " bytes");
}

void IpcMemDescriptor::fail_export(Result<IpcMemDescriptor>& exported, Error error, CUdeviceptr base) {
    int capable = 1;
    if (call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&capable),
                    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, base)
            .has_value() &&
        (capable & 0xff) == 0)
        error.message += " (this is not cuMemAlloc memory: VMM, managed, pool and host memory have no legacy IPC "
                         "handle; share VMM memory with shareable handles)";
    exported = std::move(error);
}

bool IpcMemDescriptor::exported_by_this_process() const noexcept {
    return detail::is_this_process(exporter_pid_, exporter_token_);
}

IpcMemDescriptor::Bytes IpcMemDescriptor::to_bytes() const noexcept {
    Bytes bytes{};
    detail::WireWriter out(bytes.data());
    out.header(kMagic, kSerializedSize);
    out.u64(exporter_pid_);
    out.u64(exporter_token_);
    out.u64(allocation_size_);
    out.u64(offset_);
    out.u64(size_);
    out.bytes(handle_.to_bytes().data(), IpcMemHandle::kSize);
    return bytes;
}

Result<IpcMemDescriptor> IpcMemDescriptor::from_bytes(const void* data, std::size_t size) {
    detail::WireReader in(data, size);
    CUDYN_TRY(in.check(kMagic, kSerializedSize, kWhat));
    IpcMemDescriptor descriptor;
    descriptor.exporter_pid_ = in.u64();
    descriptor.exporter_token_ = in.u64();
    descriptor.allocation_size_ = in.u64();
    descriptor.offset_ = in.u64();
    descriptor.size_ = in.u64();
    IpcMemHandle::Bytes handle{};
    in.bytes(handle.data(), handle.size());
    descriptor.handle_ = IpcMemHandle::from_bytes(handle);
    const std::string what(kWhat);
    if (descriptor.exporter_pid_ == 0) return Error::invalid_argument(what + ": exporter process id is 0");
    if (descriptor.size_ == 0) return Error::invalid_argument(what + ": shared size is 0");
    if (descriptor.offset_ > descriptor.allocation_size_ ||
        descriptor.size_ > descriptor.allocation_size_ - descriptor.offset_)
        return Error::invalid_argument(what + ": offset " + std::to_string(descriptor.offset_) + " + size " +
                                       std::to_string(descriptor.size_) + " runs past the allocation of " +
                                       std::to_string(descriptor.allocation_size_) + " bytes");
    if (descriptor.handle_ == IpcMemHandle()) return Error::invalid_argument(what + ": the handle is all zero");
    return descriptor;
}

}  // namespace cudyn
