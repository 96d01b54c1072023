// cudyn — the legacy IPC export (cuIpcGetMemHandle) and IpcMemoryDescriptor's
// byte form.
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/process_identity.hpp"
#include "core/wire_format.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {
constexpr const char* kWhat = "IpcMemoryDescriptor";
}  // namespace

namespace detail {

// The one maker of exported descriptors. It builds the descriptor inside the
// caller's Result and lets the driver write the handle straight into it:
// copying a just-written handle out of a temporary showed as tens of
// nanoseconds next to a call of about 35 (docs/measurements).
struct IpcMemoryExport {
    static Result<IpcMemoryDescriptor> make(CUdeviceptr base, std::uint64_t allocation_size, std::uint64_t offset,
                                         std::uint64_t size) {
        const ProcessIdentity self = this_process();
        Result<IpcMemoryDescriptor> exported(std::in_place, IpcMemoryDescriptor::ExportKey{}, offset, size,
                                          allocation_size, self.pid, self.token);
        if (auto got = call_driver(&DriverTable::cuIpcGetMemHandle_v4010, exported->handle_.driver_output(), base);
            !got)
            exported = not_exportable(std::move(got).error(), base);
        return exported;
    }

    // The driver's refusal, with a hint when the memory has no legacy handle.
    CUDYN_DETAIL_COLD static Error not_exportable(Error error, CUdeviceptr base) {
        int capable = 1;
        if (call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&capable),
                        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, base)
                .has_value() &&
            (capable & 0xff) == 0)
            error.message += " (this is not cuMemAlloc memory: VMM, managed, pool and host memory have no legacy "
                             "IPC handle; share VMM memory with shareable handles)";
        return error;
    }
};

Result<IpcMemoryDescriptor> export_ipc_allocation(CUdeviceptr base, std::size_t bytes) {
    if (base == 0 || bytes == 0)
        return Error::invalid_argument("export_ipc_memory: the buffer is empty (moved from or freed)");
    return IpcMemoryExport::make(base, bytes, 0, bytes);
}

}  // namespace detail

Result<IpcMemoryDescriptor> export_ipc_memory(CUdeviceptr address, std::size_t bytes) {
    if (address == 0) return Error::invalid_argument("export_ipc_memory: address is null");
    if (bytes == 0) return Error::invalid_argument("export_ipc_memory: bytes must be non-zero");
    CUdeviceptr base = 0;
    std::size_t allocation_size = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation_size, address));
    const std::uint64_t offset = address - base;
    if (bytes > allocation_size - offset)
        return Error::invalid_argument("export_ipc_memory: offset " + std::to_string(offset) + " + " +
                                       std::to_string(bytes) + " bytes runs past the allocation of " +
                                       std::to_string(allocation_size) + " bytes");
    return detail::IpcMemoryExport::make(base, allocation_size, offset, bytes);
}

bool IpcMemoryDescriptor::exported_by_this_process() const noexcept {
    return detail::is_this_process(exporter_pid_, exporter_token_);
}

namespace detail {
template <>
struct WireLayout<IpcMemoryDescriptor> {
    static constexpr char kMagic[9] = "CUDYNIPM";
    static constexpr const char* kName = kWhat;
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        wire.u64(descriptor.exporter_pid_);
        wire.u64(descriptor.exporter_token_);
        wire.u64(descriptor.allocation_size_);
        wire.u64(descriptor.offset_);
        wire.u64(descriptor.size_);
        wire.handle(descriptor.handle_);
    }
};
}  // namespace detail

IpcMemoryDescriptor::Bytes IpcMemoryDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<IpcMemoryDescriptor> IpcMemoryDescriptor::from_bytes(const void* data, std::size_t size) {
    IpcMemoryDescriptor descriptor;
    CUDYN_TRY(detail::read_record(data, size, descriptor));
    const std::string what(kWhat);
    if (descriptor.exporter_pid_ == 0) return Error::invalid_argument(what + ": exporter process id is 0");
    if (descriptor.size_ == 0) return Error::invalid_argument(what + ": shared size is 0");
    if (descriptor.offset_ > descriptor.allocation_size_ ||
        descriptor.size_ > descriptor.allocation_size_ - descriptor.offset_)
        return Error::invalid_argument(what + ": offset " + std::to_string(descriptor.offset_) + " + size " +
                                       std::to_string(descriptor.size_) + " runs past the allocation of " +
                                       std::to_string(descriptor.allocation_size_) + " bytes");
    if (descriptor.handle_ == IpcMemoryHandle()) return Error::invalid_argument(what + ": the handle is all zero");
    return descriptor;
}

}  // namespace cudyn
