// cudyn — the legacy IPC export (cuIpcGetMemHandle) and IpcMemoryDescriptor's
// byte form.
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "share/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace detail {

template <>
struct WireLayout<IpcMemoryDescriptor> {
    static constexpr char kMagic[9] = "CUDYNIPM";
    static constexpr const char* kName = "IpcMemoryDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        auto& f = RecordAccess::fields(descriptor);
        wire.exporter(f.exporter);
        wire.u64(f.allocation_size);
        wire.u64(f.offset);
        wire.u64(f.size);
        wire.handle(f.handle);
    }
    static Result<void> validate(const IpcMemoryDescriptor& descriptor) {
        const auto& f = RecordAccess::fields(descriptor);
        return check_shared_part(Operation{kName}, f.offset, f.size, f.allocation_size);
    }
};

}  // namespace detail

namespace {

constexpr detail::Operation kExport{"export_ipc_memory"};

// The driver's refusal, with a hint when the memory has no legacy handle.
CUDYN_DETAIL_COLD Error not_exportable(Error error, CUdeviceptr base) {
    int capable = 1;
    if (call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&capable),
                    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, base)
            .has_value() &&
        (capable & 0xff) == 0)
        error.message += " (this is not cuMemAlloc memory: VMM, managed, pool and host memory have no legacy "
                         "IPC handle; share VMM memory with shareable handles)";
    return error;
}

// The one maker of exported descriptors. It builds the descriptor inside the
// caller's Result and lets the driver write the handle straight into it:
// copying a just-written handle out of a temporary showed in this path's
// measured cost. Inlined into both exports (the compiler's estimate kept it
// out of line): a call of its own, with the registers both sides save,
// costs a measurable share of a driver call this short.
CUDYN_DETAIL_ALWAYS_INLINE Result<IpcMemoryDescriptor> export_base(CUdeviceptr base, std::uint64_t allocation_size, std::uint64_t offset,
                                        std::uint64_t size) {
    Result<IpcMemoryDescriptor> exported(std::in_place, detail::RecordAccess::key());
    auto& fields = detail::RecordAccess::fields(*exported);
    fields.exporter = detail::RecordAccess::this_exporter();
    fields.allocation_size = allocation_size;
    fields.offset = offset;
    fields.size = size;
    // The table called directly, as call_driver would, without a Result
    // passed between: the refusals are built out of line.
    const DriverTable* table = detail::usable_driver();
    if (CUDYN_DETAIL_UNLIKELY(table == nullptr || table->cuIpcGetMemHandle_v4010 == nullptr)) {
        exported = detail::entry_unavailable(table, &DriverTable::cuIpcGetMemHandle_v4010).error();
    } else if (const CUresult result = table->cuIpcGetMemHandle_v4010(fields.handle.driver_output(), base);
               CUDYN_DETAIL_UNLIKELY(result != CUDA_SUCCESS)) {
        exported = not_exportable(detail::call_failed(result, &DriverTable::cuIpcGetMemHandle_v4010).error(), base);
    }
    return exported;
}

}  // namespace

Result<IpcMemoryDescriptor> detail::export_ipc_allocation(CUdeviceptr base, std::size_t bytes) {
    if (base == 0 || bytes == 0) return kExport.invalid("the buffer is empty (moved from or freed)");
    return export_base(base, bytes, 0, bytes);
}

Result<IpcMemoryDescriptor> export_ipc_memory(CUdeviceptr address, std::size_t bytes) {
    if (address == 0) return kExport.invalid("address is null");
    if (bytes == 0) return kExport.invalid("bytes must be non-zero");
    CUdeviceptr base = 0;
    std::size_t allocation_size = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation_size, address));
    const std::uint64_t offset = address - base;
    CUDYN_TRY(detail::check_inside_allocation(kExport, offset, bytes, allocation_size));
    return export_base(base, allocation_size, offset, bytes);
}

IpcMemoryDescriptor::Bytes IpcMemoryDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<IpcMemoryDescriptor> IpcMemoryDescriptor::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<IpcMemoryDescriptor>(data, size);
}

}  // namespace cudyn
