// cudyn — shareable VMM handles: POSIX descriptors and fabric handles, their
// metadata records, and PhysicalMemory built from an imported handle.
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "share/internal.hpp"
#include "vmm/internal.hpp"

#if !defined(_WIN32)
#include <sys/stat.h>
#endif

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr unsigned kKnownTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                                 CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC;

Result<Location> location_from(const CUmemLocation& location) {
    switch (location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE: return Location::device(location.id);
        case CU_MEM_LOCATION_TYPE_HOST: return Location::host();
        case CU_MEM_LOCATION_TYPE_HOST_NUMA: return Location::host_numa(location.id);
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return Location::host_numa_current();
        default:
            return Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuMemGetAllocationPropertiesFromHandle",
                                      "the driver reported location type " + std::to_string(location.type) +
                                          " for an imported handle");
    }
}

constexpr detail::Operation kInfo{"PhysicalMemoryInfo"};
constexpr detail::Operation kExportFd{"export_memory_fd"};
constexpr detail::Operation kImportFd{"import_memory_fd"};
constexpr detail::Operation kExportFabric{"export_memory_fabric"};
constexpr detail::Operation kImportFabric{"import_memory_fabric"};

// The checks every export shares: live memory created with `type` requested.
Result<void> check_exportable(const PhysicalMemory& memory, HandleType type, const detail::Operation& operation) {
    if (memory.empty()) return operation.invalid("the PhysicalMemory is empty (moved from or released)");
    if (!includes(memory.properties()->handle_types(), type))
        return operation.invalid("the memory (" + memory.properties()->describe() + ") was created without the " +
                                 to_string(type) +
                                 " handle type; request it at creation (AllocationProperties::with_handle_types)");
    return ok();
}

PhysicalMemoryInfo info_of(const PhysicalMemory& memory, HandleType type) {
    PhysicalMemoryInfo info;
    info.size_bytes = memory.size_bytes();
    info.granularity = memory.granularity();
    info.handle_type = type;
    return info;
}

}  // namespace

namespace detail {

// Driver answers that mean "no fabric here" rather than a bug.
bool refuses_fabric(CUresult result) {
    return result == CUDA_ERROR_NOT_PERMITTED || result == CUDA_ERROR_NOT_SUPPORTED ||
           result == CUDA_ERROR_INVALID_VALUE || result == CUDA_ERROR_INVALID_DEVICE;
}

Error no_fabric(Error error, const char* operation) {
    error.code = ErrorCode::NotSupported;
    error.message = "the driver refused a fabric handle; fabric sharing needs an IMEX channel "
                    "(/dev/nvidia-caps-imex-channels) and a running IMEX service; share with POSIX descriptors "
                    "instead (" + error.message + ")";
    return Operation{operation}.context(std::move(error));
}

Error fabric_error(Error error, const char* operation) {
    if (error.driver_result == CUDA_ERROR_NOT_READY) {
        // Fabric handles wait on the IMEX service and the GPU's fabric
        // registration; the driver answers NOT_READY until both are up.
        error.message = "the fabric is not ready: is the IMEX service (nvidia-imex) running, and has the GPU's "
                        "NVLink fabric registration completed (cudyn-info's fabric line, nvidia-smi -q's Fabric "
                        "block)? (" + error.message + ")";
        return Operation{operation}.context(std::move(error));
    }
    return refuses_fabric(error.driver_result) ? no_fabric(std::move(error), operation) : error;
}

// Builds PhysicalMemory from an imported (or retained) handle.
Result<PhysicalMemory> adopt_imported(CUmemGenericAllocationHandle handle, const PhysicalMemoryInfo& info,
                                      const Operation& operation) {
    // The owner exists first: its destructor releases the handle if a check below fails.
    auto memory = std::make_shared<PhysicalHandle>(AllocationProperties(Location::host()));
    memory->handle = handle;
    memory->created = true;
    memory->size = static_cast<std::size_t>(info.size_bytes);
    CUmemAllocationProp prop{};
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAllocationPropertiesFromHandle_v10020, &prop, handle));
    CUDYN_TRY_ASSIGN(const Location location, location_from(prop.location));
    memory->properties = AllocationProperties(location)
                             .with_handle_types(static_cast<HandleType>(prop.requestedHandleTypes))
                             .with_gpu_direct_rdma(prop.allocFlags.gpuDirectRDMACapable != 0);
    // Mapping offsets follow this process's granularity for these
    // properties; where this driver cannot say (it does not know them),
    // the exporter's. Any other failure is reported, not papered over.
    auto granularity = query_granularity(memory->properties, Granularity::Minimum);
    if (!granularity && granularity.error().driver_result != CUDA_ERROR_NOT_SUPPORTED &&
        granularity.error().driver_result != CUDA_ERROR_INVALID_VALUE)
        return std::move(granularity).error();
    memory->granularity = granularity ? *granularity : static_cast<std::size_t>(info.granularity);
    if (info.size_bytes % memory->granularity != 0)
        return operation.invalid("size " + std::to_string(info.size_bytes) +
                                 " is not a multiple of this process's granularity " +
                                 std::to_string(memory->granularity) + " for " + memory->properties.describe());
    return VmmAccess::adopt(std::move(memory));
}

void list_import(const PhysicalMemory& memory, ImportKind kind) noexcept {
    PhysicalHandle& record = *VmmAccess::record(memory);
    const Location& location = record.properties.location();
    record.listed = import_open(LiveImport{kind, location.kind() == LocationKind::Device ? location.id() : -1,
                                           static_cast<std::uintptr_t>(record.handle), record.size});
}

}  // namespace detail

// ---- metadata ------------------------------------------------------------------------------------

Result<void> PhysicalMemoryInfo::validate() const {
    const auto type = static_cast<unsigned>(handle_type);
    if (size_bytes == 0) return kInfo.invalid("size is 0");
    if (granularity == 0) return kInfo.invalid("granularity is 0");
    if (size_bytes % granularity != 0)
        return kInfo.invalid("size " + std::to_string(size_bytes) + " is not a multiple of the granularity " +
                             std::to_string(granularity));
    if (type == 0 || (type & (type - 1)) != 0 || (type & ~kKnownTypes) != 0)
        return kInfo.invalid("handle type " + to_string(handle_type) + " is not exactly one known type");
    return ok();
}

namespace detail {
template <>
struct WireLayout<PhysicalMemoryInfo> {
    static constexpr char kMagic[9] = "CUDYNSHM";
    static constexpr const char* kName = kInfo.name();
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& info) {
        wire.u64(info.size_bytes);
        wire.u64(info.granularity);
        wire.u32(info.handle_type);
        wire.reserved(4);
    }
    static Result<void> validate(const PhysicalMemoryInfo& info) { return info.validate(); }
};
}  // namespace detail

PhysicalMemoryInfo::Bytes PhysicalMemoryInfo::to_bytes() const noexcept { return detail::write_record(*this); }

Result<PhysicalMemoryInfo> PhysicalMemoryInfo::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<PhysicalMemoryInfo>(data, size);
}

// ---- POSIX descriptors -----------------------------------------------------------------------------

Result<MemoryFdDescriptor> export_memory_fd(const PhysicalMemory& memory) {
    CUDYN_TRY(check_exportable(memory, HandleType::PosixFileDescriptor, kExportFd));
#if defined(_WIN32)
    return kExportFd.not_supported("cuMemExportToShareableHandle", "POSIX descriptors on Windows");
#else
    int fd = -1;
    CUDYN_TRY(call_driver(&DriverTable::cuMemExportToShareableHandle_v10020, static_cast<void*>(&fd), memory.handle(),
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ULL));
    return MemoryFdDescriptor{FileDescriptor(fd), info_of(memory, HandleType::PosixFileDescriptor)};
#endif
}

Result<PhysicalMemory> import_memory_fd(MemoryFdDescriptor exported) {
    // `exported` is this function's own: its descriptor closes when it returns.
    CUDYN_TRY(exported.info.validate());
    if (exported.info.handle_type != HandleType::PosixFileDescriptor)
        return kImportFd.invalid("the metadata is for a " + to_string(exported.info.handle_type) + " handle");
    if (!exported.fd) return kImportFd.invalid("the file descriptor is empty");
#if defined(_WIN32)
    return kImportFd.not_supported("cuMemImportFromShareableHandle", "POSIX descriptors on Windows");
#else
    struct stat info {};
    if (::fstat(exported.fd.get(), &info) != 0)
        return kImportFd.context(Error::system(
            "fstat", errno, "file descriptor " + std::to_string(exported.fd.get()) + " is not usable"));
    // A regular file (what a CPU emulation exports) must hold the whole allocation;
    // the driver's own descriptors report no size.
    if (S_ISREG(info.st_mode) && info.st_size > 0 && static_cast<std::uint64_t>(info.st_size) < exported.info.size_bytes)
        return kImportFd.invalid("the file has " + std::to_string(info.st_size) + " bytes, the metadata says " +
                                 std::to_string(exported.info.size_bytes));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemImportFromShareableHandle_v10020));
    CUmemGenericAllocationHandle handle = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemImportFromShareableHandle_v10020, &handle,
                          reinterpret_cast<void*>(static_cast<std::intptr_t>(exported.fd.get())),
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    // Imports count in the ledger; a retain of this process's own memory
    // (adopt_imported's other use) does not count it twice.
    CUDYN_TRY_ASSIGN(PhysicalMemory memory, detail::adopt_imported(handle, exported.info, kImportFd));
    detail::VmmAccess::record(memory)->count_in(MemoryKind::AllocationImported);
    detail::list_import(memory, ImportKind::PhysicalMemory);
    return memory;
#endif
}

// ---- fabric handles ------------------------------------------------------------------------------

namespace detail {
// The handle type is not on the wire: the magic already says fabric.
template <>
struct WireLayout<MemoryFabricDescriptor> {
    static constexpr char kMagic[9] = "CUDYNFAB";
    static constexpr const char* kName = "MemoryFabricDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        auto& f = RecordAccess::fields(descriptor);
        wire.u64(f.info.size_bytes);
        wire.u64(f.info.granularity);
        wire.handle(f.handle);
    }
    static Result<void> validate(const MemoryFabricDescriptor& descriptor) { return descriptor.info().validate(); }
};
}  // namespace detail

MemoryFabricDescriptor::Bytes MemoryFabricDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<MemoryFabricDescriptor> MemoryFabricDescriptor::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<MemoryFabricDescriptor>(data, size);
}

Result<bool> probe_fabric_support(const Device& device) {
    CUDYN_TRY_ASSIGN(const DeviceCapabilities caps, probe_capabilities(device));
    if (!caps.virtual_memory_management || !caps.fabric_handles) return false;
    const auto props = AllocationProperties::device(device.ordinal()).with_handle_types(HandleType::Fabric);
    // A refusal on any step means "no fabric here"; anything else is an error.
    const auto refusal = [](const Error& error) -> Result<bool> {
        if (detail::refuses_fabric(error.driver_result)) return false;
        return error;
    };
    auto granularity = detail::query_granularity(props, Granularity::Minimum);
    if (!granularity) return refusal(granularity.error());
    auto memory = PhysicalMemory::create(props, *granularity);
    if (!memory) return refusal(memory.error());
    CUmemFabricHandle handle{};
    auto exported = call_driver(&DriverTable::cuMemExportToShareableHandle_v10020, static_cast<void*>(&handle),
                                memory->handle(), CU_MEM_HANDLE_TYPE_FABRIC, 0ULL);
    // The trial leaves nothing behind, and says so when the driver would not
    // take its memory back (the destructor then tries once more, silently).
    CUDYN_TRY(memory->release());
    if (!exported) return refusal(exported.error());
    return true;
}

Result<MemoryFabricDescriptor> export_memory_fabric(const PhysicalMemory& memory) {
    CUDYN_TRY(check_exportable(memory, HandleType::Fabric, kExportFabric));
    const Location& where = memory.properties()->location();
    if (where.kind() == LocationKind::Device) {
        CUDYN_TRY_ASSIGN(const Device device, Device::get(where.id()));
        CUDYN_TRY_ASSIGN(const DeviceCapabilities caps, probe_capabilities(device));
        if (!caps.fabric_handles)
            return kExportFabric.not_supported({}, "device " + std::to_string(where.id()) +
                                                       " has no fabric handles (HANDLE_TYPE_FABRIC_SUPPORTED is 0)");
    }
    auto descriptor = detail::RecordAccess::make<MemoryFabricDescriptor>();
    auto& fields = detail::RecordAccess::fields(descriptor);
    auto exported = call_driver(&DriverTable::cuMemExportToShareableHandle_v10020,
                                static_cast<void*>(fields.handle.driver_output()), memory.handle(),
                                CU_MEM_HANDLE_TYPE_FABRIC, 0ULL);
    if (!exported) return detail::fabric_error(std::move(exported).error(), kExportFabric.name());
    fields.info = info_of(memory, HandleType::Fabric);
    return descriptor;
}

Result<PhysicalMemory> import_memory_fabric(const MemoryFabricDescriptor& descriptor) {
    CUDYN_TRY(descriptor.info().validate());
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemImportFromShareableHandle_v10020));
    CUmemFabricHandle raw = descriptor.handle().to_cu();
    CUmemGenericAllocationHandle handle = 0;
    auto imported = call_driver(&DriverTable::cuMemImportFromShareableHandle_v10020, &handle,
                                static_cast<void*>(&raw), CU_MEM_HANDLE_TYPE_FABRIC);
    if (!imported) {
        Error error = std::move(imported).error();
        return error.driver_result == CUDA_ERROR_NOT_PERMITTED || error.driver_result == CUDA_ERROR_NOT_SUPPORTED
                   ? detail::no_fabric(std::move(error), kImportFabric.name())
                   : error;
    }
    CUDYN_TRY_ASSIGN(PhysicalMemory memory, detail::adopt_imported(handle, descriptor.info(), kImportFabric));
    detail::VmmAccess::record(memory)->count_in(MemoryKind::AllocationImported);
    detail::list_import(memory, ImportKind::FabricMemory);
    return memory;
}

}  // namespace cudyn
