// cudyn — export_allocation: what a device address is (pointer attributes,
// cuMemRetainAllocationHandle), and the export its kind has.
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/loader/loader.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "pool/internal.hpp"
#include "share/internal.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kExport{"export_allocation"};

// The driver versions that first answer these attributes: a driver refuses a
// query that names one it does not know, so older drivers are not asked.
constexpr int kVmmAttributes = 10020;      // IS_LEGACY_CUDA_IPC_CAPABLE, RANGE_START_ADDR / SIZE, ALLOWED_HANDLE_TYPES
constexpr int kPoolAttribute = 11020;      // MEMPOOL_HANDLE
constexpr int kMappingAttributes = 11070;  // MAPPING_BASE_ADDR / MAPPING_SIZE

// What cuPointerGetAttributes says about an address: only attributes its
// documentation lists for it (the MAPPING_* pair is not among them, and is
// read on its own for VMM memory, below). An address the driver does not know
// reads memory type 0 (the query itself succeeds). Booleans sit in 4 zeroed
// bytes: drivers write 1 or 4 of them (the low byte counts).
struct PointerFacts {
    unsigned int memory_type = 0;
    unsigned int managed = 0;
    int device = -1;
    unsigned int legacy_ipc = 0;
    CUdeviceptr range_start = 0;  // the allocation (cuMemAlloc, pool memory) or the whole reservation (VMM)
    std::size_t range_size = 0;
    unsigned long long handle_types = 0;  // the memory's, or its pool's, shareable handle types
    CUmemoryPool pool = nullptr;          // the pool it came from, else null
    bool knows_vmm = false;               // the driver answered the attributes that came with VMM
};

Result<PointerFacts> read_facts(CUdeviceptr address) {
    PointerFacts facts;
    const int version = load_report().driver_version;
    CUpointer_attribute names[8];
    void* values[8];
    unsigned int count = 0;
    const auto ask = [&](CUpointer_attribute name, void* value) {
        names[count] = name;
        values[count] = value;
        ++count;
    };
    ask(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, &facts.memory_type);
    ask(CU_POINTER_ATTRIBUTE_IS_MANAGED, &facts.managed);
    ask(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, &facts.device);
    facts.knows_vmm = version >= kVmmAttributes;
    if (facts.knows_vmm) {
        ask(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, &facts.legacy_ipc);
        ask(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, &facts.range_start);
        ask(CU_POINTER_ATTRIBUTE_RANGE_SIZE, &facts.range_size);
        ask(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, &facts.handle_types);
    }
    if (version >= kPoolAttribute) ask(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, &facts.pool);
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttributes_v7000, count, names, values, address));
    facts.managed &= 0xff;
    facts.legacy_ipc &= 0xff;
    return facts;
}

// [address, address + bytes) of an allocation [base, base + size), or from
// address to its end when no size was asked for: the shared size, or
// InvalidArgument naming what it runs past.
Result<std::uint64_t> part_size(CUdeviceptr address, std::optional<std::size_t> bytes, std::uint64_t base,
                                std::uint64_t size, const char* what) {
    if (address < base || address - base >= size)
        return kExport.invalid("address " + detail::hex(address) + " is not inside the " + what +
                               " the driver reports for it (" + detail::hex(base) + ", " + std::to_string(size) +
                               " bytes)");
    const std::uint64_t offset = address - base;
    if (!bytes) return size - offset;
    CUDYN_TRY(detail::check_inside_allocation(kExport, offset, *bytes, size));
    return static_cast<std::uint64_t>(*bytes);
}

}  // namespace

namespace detail {

// Where the VMM allocation mapped at `address` lies: the mapping, which is one
// physical allocation mapped whole at offset 0 (cuMemMap takes no other
// offset). RANGE_START_ADDR would be the whole reservation.
Result<VmmMapping> read_mapping(CUdeviceptr address) {
    if (load_report().driver_version < kMappingAttributes)
        return kExport.not_supported(
            "cuPointerGetAttribute",
            "this driver (" + std::to_string(load_report().driver_version) +
                ") does not report CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR / MAPPING_SIZE (CUDA 11.7), which say "
                "where the VMM allocation at the address is mapped; export it with export_memory_fd");
    void* base = nullptr;
    VmmMapping mapping;
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&base),
                          CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, address));
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&mapping.size),
                          CU_POINTER_ATTRIBUTE_MAPPING_SIZE, address));
    mapping.base = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base));
    return mapping;
}

// cuMemRetainAllocationHandle: a reference to the physical allocation mapped
// at `address`, or nothing when it is not VMM memory (the driver answers
// INVALID_VALUE for every other kind) or the driver has no such entry.
Result<std::optional<CUmemGenericAllocationHandle>> retain_vmm(CUdeviceptr address) {
    using Retained = std::optional<CUmemGenericAllocationHandle>;
    if (!has_entry(&DriverTable::cuMemRetainAllocationHandle_v11000)) return Retained();
    CUmemGenericAllocationHandle handle = 0;
    auto retained = call_driver(&DriverTable::cuMemRetainAllocationHandle_v11000, &handle,
                                reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)));
    if (retained) return Retained(handle);
    if (retained.error().driver_result == CUDA_ERROR_INVALID_VALUE) return Retained();
    return std::move(retained).error();
}

// The VMM memory's own export: a POSIX file descriptor where it has the type,
// else a fabric handle where this machine shares them (host memory asks
// `fallback_device` whether it does).
Result<AllocationParts> export_vmm_parts(const PhysicalMemory& memory, int fallback_device) {
    const AllocationProperties& properties = *memory.properties();
    const HandleType types = properties.handle_types();
    if (includes(types, HandleType::PosixFileDescriptor)) {
        CUDYN_TRY_ASSIGN(MemoryFdDescriptor fd, export_memory_fd(memory));
        return AllocationParts(VmmFdParts{std::move(fd)});
    }
    if (!includes(types, HandleType::Fabric))
        return kExport.not_supported("cuMemExportToShareableHandle",
                                     "the VMM memory (" + properties.describe() +
                                         ") was created without a shareable handle type; create it with "
                                         "AllocationProperties::with_handle_types(HandleType::PosixFileDescriptor)");
    const Location& where = properties.location();
    const int ordinal = where.kind() == LocationKind::Device ? where.id() : fallback_device;
    CUDYN_TRY_ASSIGN(const Device device, Device::get(ordinal));
    CUDYN_TRY_ASSIGN(const bool fabric, probe_fabric_support(device));
    if (!fabric)
        return kExport.not_supported("cuMemExportToShareableHandle",
                                     "the VMM memory (" + properties.describe() +
                                         ") has only the fabric handle type, and this machine shares no fabric "
                                         "handles (probe_fabric_support: no IMEX channel)");
    CUDYN_TRY_ASSIGN(MemoryFabricDescriptor fabric_memory, export_memory_fabric(memory));
    return AllocationParts(VmmFabricParts{fabric_memory});
}

}  // namespace detail

namespace {

// Exported by this process, now.
AllocationDescriptor exported(detail::AllocationParts parts, std::uint64_t allocation_size, std::uint64_t offset,
                              std::uint64_t size) {
    return detail::RecordAccess::make<AllocationDescriptor>(std::move(parts), detail::RecordAccess::this_exporter(),
                                                            allocation_size, offset, size);
}

// cuMemAlloc memory: its legacy IPC handle.
Result<AllocationDescriptor> export_legacy(CUdeviceptr address, std::optional<std::size_t> bytes) {
    std::size_t size = bytes ? *bytes : 0;
    if (!bytes) {
        CUdeviceptr base = 0;
        std::size_t allocation = 0;
        CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation, address));
        CUDYN_TRY_ASSIGN(size, part_size(address, bytes, base, allocation, "allocation"));
    }
    CUDYN_TRY_ASSIGN(IpcMemoryDescriptor memory, export_ipc_memory(address, size));
    const std::uint64_t allocation = memory.allocation_size_bytes();
    const std::uint64_t offset = memory.offset_bytes();
    return exported(detail::LegacyIpcParts{memory}, allocation, offset, size);
}

// Pool memory: the pool (which must be shareable, and this process's own)
// and the pointer.
Result<AllocationDescriptor> export_pool_memory(CUdeviceptr address, std::optional<std::size_t> bytes,
                                                const PointerFacts& facts) {
    const auto types = static_cast<HandleType>(facts.handle_types);
    const bool posix = includes(types, HandleType::PosixFileDescriptor);
    if (!posix && !includes(types, HandleType::Fabric))
        return kExport.not_supported(
            "cuMemPoolExportPointer",
            "the memory comes from a pool created without a shareable handle type (a device's default pool, or one "
            "made without PoolProperties::with_handle_types): the driver exports pointers only from pools created "
            "shareable");
    // An importer's pool holds only what it imported; the driver refuses to
    // export such a pool.
    if (detail::has_pool_imports(facts.pool))
        return kExport.not_supported("cuMemPoolExportToShareableHandle",
                                     "this pool memory was imported from another process: imported memory has no "
                                     "handle of its own to export (export it from its exporter)");
    CUDYN_TRY_ASSIGN(const std::uint64_t size,
                     part_size(address, bytes, facts.range_start, facts.range_size, "pool allocation"));
    const MemoryPool pool =
        detail::PoolAccess::borrowed(facts.pool, Location::device(facts.device < 0 ? 0 : facts.device),
                                     types & (HandleType::PosixFileDescriptor | HandleType::Fabric));
    // The pool first, then the pointer (the order the pool's importer follows).
    const auto with_pointer = [&](auto pool_descriptor) -> Result<AllocationDescriptor> {
        CUDYN_TRY_ASSIGN(PoolPointerDescriptor pointer,
                         export_pool_pointer(pool, address, static_cast<std::size_t>(size)));
        const std::uint64_t allocation = pointer.allocation_size_bytes();
        const std::uint64_t offset = pointer.offset_bytes();
        if constexpr (std::is_same_v<decltype(pool_descriptor), PoolFdDescriptor>)
            return exported(detail::PoolFdParts{std::move(pool_descriptor), pointer}, allocation, offset, size);
        else
            return exported(detail::PoolFabricParts{pool_descriptor, pointer}, allocation, offset, size);
    };
    if (posix) return export_pool_fd(pool).and_then(with_pointer);
    return export_pool_fabric(pool).and_then(with_pointer);
}

// VMM memory: the physical allocation mapped at the address. `handle` is a
// retained reference: given back before this returns, whatever happened.
Result<AllocationDescriptor> export_vmm(CUdeviceptr address, std::optional<std::size_t> bytes,
                                        const PointerFacts& facts, CUmemGenericAllocationHandle handle) {
    // The mapping's size is what the importer maps. It also stands in for the
    // granularity where this driver cannot give one for the handle's
    // properties (a size is always a multiple of itself). The handle is owned
    // from the adoption on: any failure below gives it back.
    auto mapping = detail::read_mapping(address);
    if (!mapping || mapping->size == 0) {
        (void)call_driver(&DriverTable::cuMemRelease_v10020, handle);
        if (!mapping) return std::move(mapping).error();
        return kExport.context(Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute",
                                                  "the driver reported a VMM mapping of 0 bytes"));
    }
    PhysicalMemoryInfo info;
    info.size_bytes = mapping->size;
    info.granularity = mapping->size;
    CUDYN_TRY_ASSIGN(PhysicalMemory memory, detail::adopt_imported(handle, info, kExport));
    auto size = part_size(address, bytes, mapping->base, mapping->size, "VMM mapping");
    if (!size) {
        Error error = std::move(size).error();
        error.message += " (VMM memory is exported one mapping, one physical allocation, at a time)";
        return error;
    }
    CUDYN_TRY_ASSIGN(detail::AllocationParts parts, detail::export_vmm_parts(memory, facts.device < 0 ? 0 : facts.device));
    // The retained reference goes back now; a refusal is reported (the
    // PhysicalMemory's destructor then tries once more, silently).
    CUDYN_TRY(memory.release());
    return exported(std::move(parts), mapping->size, address - mapping->base, *size);
}

Result<AllocationDescriptor> export_any(CUdeviceptr address, std::optional<std::size_t> bytes) {
    if (address == 0) return kExport.invalid("address is null");
    if (bytes) {
        if (*bytes == 0) return kExport.invalid("bytes must be non-zero");
        CUDYN_TRY(detail::check_address_range(address, *bytes, kExport.name()));
    }
    CUDYN_TRY_ASSIGN(const PointerFacts facts, read_facts(address));
    if (facts.memory_type == 0)
        return kExport.invalid("the driver does not know address " + detail::hex(address) +
                               ": it is not GPU memory (plain host memory, or a VMM reservation with nothing mapped "
                               "there)");
    if (facts.managed != 0)
        return kExport.not_supported({}, "managed memory (cuMemAllocManaged) has no inter-process handle");
    if (facts.pool != nullptr) return export_pool_memory(address, bytes, facts);
    // Before VMM, all device memory that was not managed was cuMemAlloc memory.
    const bool legacy = facts.knows_vmm ? facts.legacy_ipc != 0 : facts.memory_type == CU_MEMORYTYPE_DEVICE;
    if (legacy) return export_legacy(address, bytes);
    CUDYN_TRY_ASSIGN(const auto retained, detail::retain_vmm(address));
    if (retained) return export_vmm(address, bytes, facts, *retained);
    if (facts.memory_type == CU_MEMORYTYPE_HOST)
        return kExport.not_supported({}, "pinned, mapped or registered host memory (cuMemHostAlloc, "
                                          "cuMemHostRegister) has no inter-process handle; share host memory as VMM "
                                          "memory on a host NUMA node created with a shareable handle type");
    return kExport.not_supported({}, "this device memory has no inter-process handle of its own (memory imported "
                                      "from another process: export it from its exporter)");
}

}  // namespace

Result<AllocationDescriptor> export_allocation(CUdeviceptr address, std::size_t bytes) {
    return export_any(address, bytes);
}

Result<AllocationDescriptor> export_allocation(CUdeviceptr address) { return export_any(address, std::nullopt); }

}  // namespace cudyn
