// cudyn — IpcMemDescriptor: exporting cuMemAlloc memory with its legacy IPC
// handle, and the descriptor's byte form. Also the process identity the IPC
// modules share.
#include "cudyn/ipc_memory.hpp"
#include "cudyn/driver_call.hpp"

#include "ipc_detail.hpp"
#include "wire_format.hpp"

#if defined(_WIN32)
#include <process.h>
#else
#include <pthread.h>
#include <unistd.h>
#endif

#include <atomic>
#include <random>
#include <string>

namespace cudyn {

namespace detail {

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
std::atomic<std::uint64_t> cached_pid{0};
#if !defined(_WIN32)
void refresh_pid_after_fork() noexcept { cached_pid.store(current_pid(), std::memory_order_relaxed); }
#endif

// Drawn once per process, on the first export. Kept out of line: its
// random_device is kilobytes of stack that the export path should not carry.
CUDYN_DETAIL_COLD std::uint64_t draw_process_token() {
    std::random_device source;
    std::uint64_t token = 0;
    do {
        token = (static_cast<std::uint64_t>(source()) << 32) ^ source();
    } while (token == 0);
    cached_pid.store(current_pid(), std::memory_order_relaxed);
#if !defined(_WIN32)
    (void)::pthread_atfork(nullptr, nullptr, refresh_pid_after_fork);
#endif
    return token;
}
}  // namespace

ProcessIdentity this_process() noexcept {
    // A function-local static rather than std::call_once: after the first
    // call its guard is one load, where libstdc++'s call_once sets two
    // thread-locals and calls pthread_once on every export.
    static const std::uint64_t token = draw_process_token();
    return ProcessIdentity{cached_pid.load(std::memory_order_relaxed), token};
}

bool is_this_process(std::uint64_t pid, std::uint64_t token) noexcept {
    const ProcessIdentity self = this_process();
    return pid == self.pid && token == self.token;
}

}  // namespace detail

namespace {

constexpr char kMagic[9] = "CUDYNIPM";
constexpr const char* kWhat = "IpcMemDescriptor";

// The driver's refusal, with what usually causes it. Out of line and cold, like
// the other failures below: the export path is then a handful of stores
// around the driver call, with no registers saved for error handling.
CUDYN_DETAIL_COLD Error export_error(Error error, CUdeviceptr base) {
    int capable = 1;
    if (call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&capable),
                    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, base)
            .has_value() &&
        (capable & 0xff) == 0)
        error.message += " (this is not cuMemAlloc memory: VMM, managed, pool and host memory have no legacy IPC "
                         "handle; share VMM memory with shareable handles)";
    return error;
}

CUDYN_DETAIL_COLD Result<IpcMemDescriptor> empty_buffer_error() {
    return Error::invalid_argument("IpcMemDescriptor::export_buffer: the buffer is empty (moved from or freed)");
}

}  // namespace

// Always inlined: only this file calls it, and export_buffer's whole cost is
// this body next to a ~35 ns driver call, so it should not add a call of its own.
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
inline Result<IpcMemDescriptor> IpcMemDescriptor::make(CUdeviceptr base, std::uint64_t allocation_size,
                                                       std::uint64_t offset, std::uint64_t size) {
    const detail::ProcessIdentity self = detail::this_process();
    // Built where the caller receives it (one named result, returned on every
    // path) and handed to the driver to fill: the handle is never copied
    // after the driver wrote it. Measured on an H200: building the descriptor
    // on the stack and moving it out cost ~28 ns on top of a 34 ns
    // cuIpcGetMemHandle (reloading bytes just stored); built in place, 2-8 ns.
    Result<IpcMemDescriptor> exported(std::in_place, ExportKey{}, offset, size, allocation_size, self.pid, self.token);
    if (auto got = call_driver(&DriverTable::cuIpcGetMemHandle_v4010, exported->handle_.driver_output(), base); !got)
        exported = export_error(std::move(got).error(), base);
    return exported;
}

Result<IpcMemDescriptor> IpcMemDescriptor::export_range(CUdeviceptr address, std::size_t bytes) {
    if (address == 0) return Error::invalid_argument("IpcMemDescriptor::export_range: address is null");
    if (bytes == 0) return Error::invalid_argument("IpcMemDescriptor::export_range: bytes must be non-zero");
    CUdeviceptr base = 0;
    std::size_t allocation_size = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation_size, address));
    const std::uint64_t offset = address - base;
    if (bytes > allocation_size - offset)
        return Error::invalid_argument("IpcMemDescriptor::export_range: offset " + std::to_string(offset) + " + " +
                                       std::to_string(bytes) + " bytes runs past the allocation of " +
                                       std::to_string(allocation_size) + " bytes");
    return make(base, allocation_size, offset, bytes);
}

Result<IpcMemDescriptor> IpcMemDescriptor::export_allocation(CUdeviceptr base, std::size_t bytes) {
    if (base == 0 || bytes == 0) return empty_buffer_error();
    return make(base, bytes, 0, bytes);
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
