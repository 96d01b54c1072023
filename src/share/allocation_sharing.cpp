// cudyn — export_allocation: what a device address is (pointer attributes,
// cuMemRetainAllocationHandle) and the export that kind has; the one channel
// message every kind travels as; import_allocation and the owner of what it opened.
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/memory/owned_memory.hpp"

#include "share/internal.hpp"
#include "pool/internal.hpp"
#include "memory/internal.hpp"
#include "core/process_identity.hpp"
#include "core/wire_format.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cudyn {

const char* to_string(AllocationKind kind) noexcept {
    switch (kind) {
        case AllocationKind::LegacyIpc: return "legacy_ipc";
        case AllocationKind::Vmm: return "vmm";
        case AllocationKind::Pool: return "pool";
    }
    return "unknown";
}

// ---- the value ------------------------------------------------------------------------------------

namespace {

// AllocationDescriptor::Parts, alternative by alternative.
enum PartsIndex : std::size_t { kLegacy = 0, kVmmFd = 1, kVmmFabric = 2, kPoolFd = 3, kPoolFabric = 4 };

AllocationKind kind_of(std::size_t index) noexcept {
    if (index == kLegacy) return AllocationKind::LegacyIpc;
    return index == kVmmFd || index == kVmmFabric ? AllocationKind::Vmm : AllocationKind::Pool;
}

HandleType handle_type_of(std::size_t index) noexcept {
    if (index == kLegacy) return HandleType::None;
    return index == kVmmFd || index == kPoolFd ? HandleType::PosixFileDescriptor : HandleType::Fabric;
}

std::string hex(std::uint64_t value) {
    static const char kDigits[] = "0123456789abcdef";
    std::string text;
    do {
        text.insert(text.begin(), kDigits[value % 16]);
        value /= 16;
    } while (value != 0);
    return "0x" + text;
}

}  // namespace

AllocationDescriptor::AllocationDescriptor(Parts parts, std::uint64_t offset, std::uint64_t size,
                                   std::uint64_t allocation_size, std::uint64_t exporter_pid,
                                   std::uint64_t exporter_token) noexcept
    : parts_(std::move(parts)), kind_(kind_of(parts_.index())), handle_type_(handle_type_of(parts_.index())),
      offset_(offset), size_(size), allocation_size_(allocation_size), exporter_pid_(exporter_pid),
      exporter_token_(exporter_token) {}

bool AllocationDescriptor::carries_descriptor() const noexcept {
    return parts_.index() == kVmmFd || parts_.index() == kPoolFd;
}

bool AllocationDescriptor::exported_by_this_process() const noexcept {
    return detail::is_this_process(exporter_pid_, exporter_token_);
}

namespace detail {

// The one maker and reader of AllocationDescriptor's parts.
struct AllocationDescriptorAccess {
    using Parts = AllocationDescriptor::Parts;
    template <typename PoolPart>
    using PoolParts = AllocationDescriptor::PoolParts<PoolPart>;

    // Shared by this process now.
    static AllocationDescriptor exported(Parts parts, std::uint64_t offset, std::uint64_t size,
                                     std::uint64_t allocation_size) {
        const ProcessIdentity self = this_process();
        return AllocationDescriptor(std::move(parts), offset, size, allocation_size, self.pid, self.token);
    }
    static AllocationDescriptor received(Parts parts, std::uint64_t offset, std::uint64_t size,
                                     std::uint64_t allocation_size, std::uint64_t pid, std::uint64_t token) {
        return AllocationDescriptor(std::move(parts), offset, size, allocation_size, pid, token);
    }
    static const Parts& parts(const AllocationDescriptor& shared) noexcept { return shared.parts_; }
    static std::uint64_t token(const AllocationDescriptor& shared) noexcept { return shared.exporter_token_; }
};

}  // namespace detail

using Access = detail::AllocationDescriptorAccess;

// ---- what the address is ---------------------------------------------------------------------------

namespace {

constexpr const char* kShare = "export_allocation";

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

// Where the VMM allocation mapped at `address` lies: the mapping, which is one
// physical allocation mapped whole at offset 0 (cuMemMap takes no other
// offset). RANGE_START_ADDR would be the whole reservation.
struct Mapping {
    std::uint64_t base = 0;
    std::size_t size = 0;
};

Result<Mapping> read_mapping(CUdeviceptr address) {
    if (load_report().driver_version < kMappingAttributes)
        return Error::not_supported(
            "cuPointerGetAttribute",
            std::string(kShare) + ": this driver (" + std::to_string(load_report().driver_version) +
                ") does not report CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR / MAPPING_SIZE (CUDA 11.7), which say "
                "where the VMM allocation at the address is mapped; share it with export_memory_fd");
    void* base = nullptr;
    Mapping mapping;
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&base),
                          CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, address));
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&mapping.size),
                          CU_POINTER_ATTRIBUTE_MAPPING_SIZE, address));
    mapping.base = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base));
    return mapping;
}

// [address, address + bytes) of an allocation [base, base + size), or from
// address to its end when no size was asked for: the shared size, or
// InvalidArgument naming what it runs past.
Result<std::uint64_t> part_size(CUdeviceptr address, std::optional<std::size_t> bytes, std::uint64_t base,
                                std::uint64_t size, const char* what, const char* hint = "") {
    if (address < base || address - base >= size)
        return Error::invalid_argument(std::string(kShare) + ": address " + hex(address) + " is not inside the " +
                                       what + " the driver reports for it (" + hex(base) + ", " +
                                       std::to_string(size) + " bytes)");
    const std::uint64_t offset = address - base;
    if (!bytes) return size - offset;
    if (*bytes > size - offset)
        return Error::invalid_argument(std::string(kShare) + ": " + std::to_string(*bytes) + " bytes at offset " +
                                       std::to_string(offset) + " run past the " + what + " of " +
                                       std::to_string(size) + " bytes" + hint);
    return static_cast<std::uint64_t>(*bytes);
}

// cuMemAlloc memory: its legacy IPC handle.
Result<AllocationDescriptor> share_legacy(CUdeviceptr address, std::optional<std::size_t> bytes) {
    std::size_t size = bytes ? *bytes : 0;
    if (!bytes) {
        CUdeviceptr base = 0;
        std::size_t allocation = 0;
        CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation, address));
        CUDYN_TRY_ASSIGN(size, part_size(address, bytes, base, allocation, "allocation"));
    }
    CUDYN_TRY_ASSIGN(IpcMemoryDescriptor descriptor, export_ipc_memory(address, size));
    const std::uint64_t offset = descriptor.offset_bytes();
    const std::uint64_t shared = descriptor.size_bytes();
    const std::uint64_t allocation = descriptor.allocation_size_bytes();
    return Access::exported(std::move(descriptor), offset, shared, allocation);
}

// Pool memory: the pool (which must be shareable) and the pointer.
Result<AllocationDescriptor> share_pool_memory(CUdeviceptr address, std::optional<std::size_t> bytes,
                                           const PointerFacts& facts) {
    const auto types = static_cast<HandleType>(facts.handle_types);
    const bool posix = includes(types, HandleType::PosixFileDescriptor);
    if (!posix && !includes(types, HandleType::Fabric))
        return Error::not_supported(
            "cuMemPoolExportPointer",
            std::string(kShare) + ": the memory comes from a pool created without a shareable handle type (a "
                                  "device's default pool, or one made without PoolProperties::with_handle_types): "
                                  "the driver exports pointers only from pools created shareable");
    CUDYN_TRY_ASSIGN(const std::uint64_t size,
                     part_size(address, bytes, facts.range_start, facts.range_size, "pool allocation"));
    const MemoryPool pool =
        detail::PoolAccess::borrowed(facts.pool, Location::device(facts.device < 0 ? 0 : facts.device),
                                     types & (HandleType::PosixFileDescriptor | HandleType::Fabric));
    // The pool first, then the pointer (the order the pool's importer follows).
    const auto with_pointer = [&](auto exported_pool) -> Result<AllocationDescriptor> {
        CUDYN_TRY_ASSIGN(PoolPointerDescriptor pointer,
                         export_pool_pointer(pool, address, static_cast<std::size_t>(size)));
        const std::uint64_t offset = pointer.offset_bytes();
        const std::uint64_t allocation = pointer.allocation_size_bytes();
        using PoolPart = decltype(exported_pool);
        return Access::exported(Access::PoolParts<PoolPart>{std::move(exported_pool), pointer}, offset, size,
                                allocation);
    };
    if (posix) return export_pool_fd(pool).and_then(with_pointer);
    return export_pool_fabric(pool).and_then(with_pointer);
}

// cuMemRetainAllocationHandle: a reference to the physical allocation mapped
// at `address`, or nothing when it is not VMM memory (the driver answers
// INVALID_VALUE for every other kind) or the driver has no such entry.
Result<std::optional<CUmemGenericAllocationHandle>> retain_vmm(CUdeviceptr address) {
    if (driver().cuMemRetainAllocationHandle_v11000 == nullptr) return std::optional<CUmemGenericAllocationHandle>();
    CUmemGenericAllocationHandle handle = 0;
    auto retained = call_driver(&DriverTable::cuMemRetainAllocationHandle_v11000, &handle,
                                reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)));
    if (retained) return std::optional<CUmemGenericAllocationHandle>(handle);
    if (retained.error().driver_result == CUDA_ERROR_INVALID_VALUE) return std::optional<CUmemGenericAllocationHandle>();
    return std::move(retained).error();
}

// VMM memory: the physical allocation mapped at the address, as a POSIX
// descriptor or a fabric handle. `handle` is a retained reference: given back
// before this returns, whatever happened.
Result<AllocationDescriptor> share_vmm(CUdeviceptr address, std::optional<std::size_t> bytes, const PointerFacts& facts,
                                   CUmemGenericAllocationHandle handle) {
    // The mapping's size is what the peer maps. It also stands in for the
    // granularity where this driver cannot give one for the handle's
    // properties (a size is always a multiple of itself). The handle is owned
    // from the adoption on: any failure below gives it back.
    PhysicalMemoryInfo info;
    info.handle_type = HandleType::None;
    auto mapping = read_mapping(address);
    if (!mapping || mapping->size == 0) {
        (void)call_driver(&DriverTable::cuMemRelease_v10020, handle);
        if (!mapping) return std::move(mapping).error();
        return Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute",
                                  std::string(kShare) + ": the driver reported a VMM mapping of 0 bytes");
    }
    info.size_bytes = mapping->size;
    info.granularity = mapping->size;
    CUDYN_TRY_ASSIGN(PhysicalMemory memory, detail::adopt_imported(handle, info, kShare));
    const std::uint64_t base = mapping->base;
    CUDYN_TRY_ASSIGN(const std::uint64_t size,
                     part_size(address, bytes, base, mapping->size, "VMM mapping",
                               " (VMM memory is shared one mapping, one physical allocation, at a time)"));
    const AllocationProperties& properties = *memory.properties();
    const HandleType types = properties.handle_types();
    std::optional<Access::Parts> parts;
    if (includes(types, HandleType::PosixFileDescriptor)) {
        CUDYN_TRY_ASSIGN(MemoryFdDescriptor exported, export_memory_fd(memory));
        parts.emplace(std::in_place_index<kVmmFd>, std::move(exported));
    } else if (includes(types, HandleType::Fabric)) {
        const Location& where = properties.location();
        const int ordinal = where.kind() == LocationKind::Device ? where.id() : (facts.device < 0 ? 0 : facts.device);
        CUDYN_TRY_ASSIGN(const Device device, Device::get(ordinal));
        CUDYN_TRY_ASSIGN(const bool fabric, probe_fabric_support(device));
        if (!fabric)
            return Error::not_supported("cuMemExportToShareableHandle",
                                        std::string(kShare) + ": the VMM memory (" + properties.describe() +
                                            ") has only the fabric handle type, and this machine shares no fabric "
                                            "handles (probe_fabric_support: no IMEX channel)");
        CUDYN_TRY_ASSIGN(MemoryFabricDescriptor exported, export_memory_fabric(memory));
        parts.emplace(std::in_place_index<kVmmFabric>, exported);
    } else {
        return Error::not_supported("cuMemExportToShareableHandle",
                                    std::string(kShare) + ": the VMM memory (" + properties.describe() +
                                        ") was created without a shareable handle type; create it with "
                                        "AllocationProperties::with_handle_types(HandleType::PosixFileDescriptor)");
    }
    // The retained reference goes back now; a refusal is reported (the
    // PhysicalMemory's destructor then tries once more, silently).
    CUDYN_TRY(memory.release());
    return Access::exported(std::move(*parts), address - base, size, mapping->size);
}

Result<AllocationDescriptor> share(CUdeviceptr address, std::optional<std::size_t> bytes) {
    if (address == 0) return Error::invalid_argument(std::string(kShare) + ": address is null");
    if (bytes) {
        if (*bytes == 0) return Error::invalid_argument(std::string(kShare) + ": bytes must be non-zero");
        CUDYN_TRY(detail::check_address_range(address, *bytes, kShare));
    }
    CUDYN_TRY_ASSIGN(const PointerFacts facts, read_facts(address));
    if (facts.memory_type == 0)
        return Error::invalid_argument(std::string(kShare) + ": the driver does not know address " + hex(address) +
                                       ": it is not GPU memory (plain host memory, or a VMM reservation with "
                                       "nothing mapped there)");
    if (facts.managed != 0)
        return Error::not_supported({}, std::string(kShare) + ": managed memory (cuMemAllocManaged) has no "
                                                              "inter-process handle");
    if (facts.pool != nullptr) return share_pool_memory(address, bytes, facts);
    // Before VMM, all device memory that was not managed was cuMemAlloc memory.
    const bool legacy = facts.knows_vmm ? facts.legacy_ipc != 0 : facts.memory_type == CU_MEMORYTYPE_DEVICE;
    if (legacy) return share_legacy(address, bytes);
    CUDYN_TRY_ASSIGN(const auto retained, retain_vmm(address));
    if (retained) return share_vmm(address, bytes, facts, *retained);
    if (facts.memory_type == CU_MEMORYTYPE_HOST)
        return Error::not_supported({}, std::string(kShare) +
                                            ": pinned, mapped or registered host memory (cuMemHostAlloc, "
                                            "cuMemHostRegister) has no inter-process handle; share host memory as "
                                            "VMM memory on a host NUMA node created with a shareable handle type");
    return Error::not_supported({}, std::string(kShare) +
                                        ": this device memory has no inter-process handle of its own (memory opened "
                                        "or imported from another process: share it from its exporter)");
}

}  // namespace

Result<AllocationDescriptor> export_allocation(CUdeviceptr address, std::size_t bytes) { return share(address, bytes); }

Result<AllocationDescriptor> export_allocation(CUdeviceptr address) { return share(address, std::nullopt); }

// ---- on the wire -------------------------------------------------------------------------------------

namespace detail {

// The record every message starts with; the kind's own records follow it.
struct SharedRecord {
    static constexpr std::size_t kSerializedSize = 64;
    std::uint32_t kind = 0;
    std::uint32_t handle_type = 0;
    std::uint64_t exporter_pid = 0;
    std::uint64_t exporter_token = 0;
    std::uint64_t allocation_size = 0;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
};

template <>
struct WireLayout<SharedRecord> {
    static constexpr char kMagic[9] = "CUDYNSAL";
    static constexpr const char* kName = "AllocationDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& record) {
        wire.u32(record.kind);
        wire.u32(record.handle_type);
        wire.u64(record.exporter_pid);
        wire.u64(record.exporter_token);
        wire.u64(record.allocation_size);
        wire.u64(record.offset);
        wire.u64(record.size);
    }
};

}  // namespace detail

namespace {

constexpr const char* kReceive = "receive_allocation";

// The bytes of the kind's records after the SharedRecord.
std::size_t parts_size(std::size_t index) noexcept {
    switch (index) {
        case kLegacy: return IpcMemoryDescriptor::kSerializedSize;
        case kVmmFd: return PhysicalMemoryInfo::kSerializedSize;
        case kVmmFabric: return MemoryFabricDescriptor::kSerializedSize;
        case kPoolFd: return PoolInfo::kSerializedSize + PoolPointerDescriptor::kSerializedSize;
        default: return PoolFabricDescriptor::kSerializedSize + PoolPointerDescriptor::kSerializedSize;
    }
}

// The alternative a (kind, handle type) pair names, or nothing.
std::optional<std::size_t> index_of(std::uint32_t kind, std::uint32_t handle_type) noexcept {
    const auto type = static_cast<HandleType>(handle_type);
    for (std::size_t index = kLegacy; index <= kPoolFabric; ++index)
        if (static_cast<std::uint32_t>(kind_of(index)) == kind && handle_type_of(index) == type) return index;
    return std::nullopt;
}

template <std::size_t N>
void append(std::vector<std::uint8_t>& out, const std::array<std::uint8_t, N>& bytes) {
    out.insert(out.end(), bytes.begin(), bytes.end());
}

Error malformed(const std::string& what) { return Error::invalid_argument(std::string(kReceive) + ": " + what); }

// A record of the kind's parts that must agree with the SharedRecord.
Result<void> agree(const char* part, std::uint64_t offset, std::uint64_t size, std::uint64_t allocation,
                   const detail::SharedRecord& record) {
    if (offset != record.offset || size != record.size || allocation != record.allocation_size)
        return malformed(std::string("the ") + part + " (offset " + std::to_string(offset) + ", size " +
                         std::to_string(size) + ", allocation " + std::to_string(allocation) +
                         ") disagrees with the record (offset " + std::to_string(record.offset) + ", size " +
                         std::to_string(record.size) + ", allocation " + std::to_string(record.allocation_size) + ")");
    return ok();
}

Result<Access::Parts> read_parts(std::size_t index, const std::uint8_t* data, FileDescriptor fd,
                                 const detail::SharedRecord& record) {
    switch (index) {
        case kLegacy: {
            CUDYN_TRY_ASSIGN(IpcMemoryDescriptor descriptor, IpcMemoryDescriptor::from_bytes(data, parts_size(index)));
            CUDYN_TRY(agree("legacy IPC descriptor", descriptor.offset_bytes(), descriptor.size_bytes(),
                            descriptor.allocation_size_bytes(), record));
            return Access::Parts(std::in_place_index<kLegacy>, descriptor);
        }
        case kVmmFd: {
            CUDYN_TRY_ASSIGN(const PhysicalMemoryInfo info, PhysicalMemoryInfo::from_bytes(data, parts_size(index)));
            if (info.handle_type != HandleType::PosixFileDescriptor)
                return malformed("the VMM record names a " + to_string(info.handle_type) +
                                 " handle, the message a POSIX descriptor");
            CUDYN_TRY(agree("VMM record", record.offset, record.size, info.size_bytes, record));
            return Access::Parts(std::in_place_index<kVmmFd>, MemoryFdDescriptor{std::move(fd), info});
        }
        case kVmmFabric: {
            CUDYN_TRY_ASSIGN(MemoryFabricDescriptor descriptor, MemoryFabricDescriptor::from_bytes(data, parts_size(index)));
            CUDYN_TRY(agree("fabric descriptor", record.offset, record.size, descriptor.info().size_bytes, record));
            return Access::Parts(std::in_place_index<kVmmFabric>, descriptor);
        }
        default: {
            const std::size_t pool_bytes =
                index == kPoolFd ? PoolInfo::kSerializedSize : PoolFabricDescriptor::kSerializedSize;
            CUDYN_TRY_ASSIGN(PoolPointerDescriptor pointer,
                             PoolPointerDescriptor::from_bytes(data + pool_bytes, PoolPointerDescriptor::kSerializedSize));
            CUDYN_TRY(agree("pool pointer descriptor", pointer.offset_bytes(), pointer.size_bytes(),
                            pointer.allocation_size_bytes(), record));
            const auto same_pool = [&](const PoolInfo& info) -> Result<void> {
                if (info.origin != pointer.origin())
                    return malformed("the pool pointer comes from another pool than the pool sent with it");
                return ok();
            };
            if (index == kPoolFd) {
                CUDYN_TRY_ASSIGN(const PoolInfo info, PoolInfo::from_bytes(data, pool_bytes));
                CUDYN_TRY(same_pool(info));
                return Access::Parts(std::in_place_index<kPoolFd>,
                                     Access::PoolParts<PoolFdDescriptor>{PoolFdDescriptor{std::move(fd), info}, pointer});
            }
            CUDYN_TRY_ASSIGN(PoolFabricDescriptor pool, PoolFabricDescriptor::from_bytes(data, pool_bytes));
            CUDYN_TRY(same_pool(pool.info()));
            return Access::Parts(std::in_place_index<kPoolFabric>, Access::PoolParts<PoolFabricDescriptor>{pool, pointer});
        }
    }
}

// A message's payload and descriptor as a AllocationDescriptor; nothing stays open on failure.
Result<AllocationDescriptor> parse(const std::vector<std::uint8_t>& payload, FileDescriptor fd) {
    constexpr std::size_t kRecord = detail::SharedRecord::kSerializedSize;
    if (payload.size() < kRecord)
        return malformed(std::to_string(payload.size()) + " bytes, shorter than the " + std::to_string(kRecord) +
                         "-byte AllocationDescriptor record");
    detail::SharedRecord record;
    CUDYN_TRY(detail::read_record(payload.data(), kRecord, record));
    const auto index = index_of(record.kind, record.handle_type);
    if (!index)
        return malformed("kind " + std::to_string(record.kind) + " with handle type " +
                         std::to_string(record.handle_type) + " is not a kind of shared allocation this cudyn knows");
    if (record.exporter_pid == 0 || record.exporter_token == 0) return malformed("the exporter's identity is 0");
    if (record.size == 0) return malformed("the shared size is 0");
    if (record.offset > record.allocation_size || record.size > record.allocation_size - record.offset)
        return malformed("offset " + std::to_string(record.offset) + " + size " + std::to_string(record.size) +
                         " runs past the allocation of " + std::to_string(record.allocation_size) + " bytes");
    const std::size_t expected = kRecord + parts_size(*index);
    if (payload.size() != expected)
        return malformed(std::to_string(payload.size()) + " bytes for a " + to_string(kind_of(*index)) + " (" +
                         to_string(handle_type_of(*index)) + ") allocation, which takes " + std::to_string(expected));
    const bool needs_fd = *index == kVmmFd || *index == kPoolFd;
    if (needs_fd && !fd) return malformed("the message carried no descriptor, which this kind needs");
    if (!needs_fd && fd) return malformed("the message carried a descriptor, which this kind has none of");
    CUDYN_TRY_ASSIGN(Access::Parts parts, read_parts(*index, payload.data() + kRecord, std::move(fd), record));
    return Access::received(std::move(parts), record.offset, record.size, record.allocation_size,
                            record.exporter_pid, record.exporter_token);
}

}  // namespace

Result<void> send_descriptor(FdChannel& channel, const AllocationDescriptor& shared, std::chrono::milliseconds timeout) {
    const Access::Parts& parts = Access::parts(shared);
    detail::SharedRecord record;
    record.kind = static_cast<std::uint32_t>(shared.kind());
    record.handle_type = static_cast<std::uint32_t>(shared.handle_type());
    record.exporter_pid = shared.exporter_pid();
    record.exporter_token = Access::token(shared);
    record.allocation_size = shared.allocation_size_bytes();
    record.offset = shared.offset_bytes();
    record.size = shared.size_bytes();
    std::vector<std::uint8_t> payload;
    payload.reserve(detail::SharedRecord::kSerializedSize + parts_size(parts.index()));
    append(payload, detail::write_record(record));
    int fd = -1;
    switch (parts.index()) {
        case kLegacy: append(payload, std::get<kLegacy>(parts).to_bytes()); break;
        case kVmmFd:
            append(payload, std::get<kVmmFd>(parts).info.to_bytes());
            fd = std::get<kVmmFd>(parts).fd.get();
            break;
        case kVmmFabric: append(payload, std::get<kVmmFabric>(parts).to_bytes()); break;
        case kPoolFd:
            append(payload, std::get<kPoolFd>(parts).pool.info.to_bytes());
            append(payload, std::get<kPoolFd>(parts).pointer.to_bytes());
            fd = std::get<kPoolFd>(parts).pool.fd.get();
            break;
        default:
            append(payload, std::get<kPoolFabric>(parts).pool.to_bytes());
            append(payload, std::get<kPoolFabric>(parts).pointer.to_bytes());
            break;
    }
    if (shared.carries_descriptor() && fd < 0)
        return Error::invalid_argument("send_descriptor: the descriptor is closed (the AllocationDescriptor was moved from)");
    return channel.send(kAllocationMessageTag, payload.data(), payload.size(), fd, timeout);
}

Result<AllocationDescriptor> receive_allocation(FdChannel& channel, std::chrono::milliseconds timeout) {
    CUDYN_TRY_ASSIGN(ChannelMessage message, channel.receive(kAllocationMessageTag, timeout));
    return parse(message.payload, std::move(message.fd));
}

// ---- the peer's side ------------------------------------------------------------------------------------

namespace {

constexpr const char* kOpen = "import_allocation";

// A second descriptor of what `shared` carries, for an import that closes its own.
Result<FileDescriptor> duplicate(const FileDescriptor& fd) {
    if (!fd) return Error::invalid_argument(std::string(kOpen) + ": the descriptor is closed (moved from)");
    return fd.duplicate();
}

// Imported VMM memory mapped whole, read-write for the current context's device.
Result<MappedRange> map_for_this_device(const PhysicalMemory& memory) {
    CUDYN_TRY_ASSIGN(const CUdevice device, detail::current_context_device());
    CUDYN_TRY_ASSIGN(const AddressRange range, AddressRange::reserve(memory.size_bytes()));
    // The mapping keeps the range and the memory: both owners may go here.
    return MappedRange::map(range, 0, memory, {{Location::device(static_cast<int>(device)), AccessFlags::ReadWrite}});
}

}  // namespace

Result<ImportedAllocation> import_allocation(const AllocationDescriptor& shared) {
    if (shared.exported_by_this_process())
        return Error::invalid_argument(std::string(kOpen) +
                                       ": the allocation was shared by this process (use its memory directly)");
    const Access::Parts& parts = Access::parts(shared);
    ImportedAllocation::Traits::State state;
    state.kind = shared.kind();
    state.size = static_cast<std::size_t>(shared.size_bytes());
    switch (parts.index()) {
        case kLegacy: {
            CUDYN_TRY_ASSIGN(state.opened, import_ipc_memory(std::get<kLegacy>(parts)));
            state.address = state.opened.device_address();
            break;
        }
        case kVmmFd:
        case kVmmFabric: {
            PhysicalMemory memory;
            if (parts.index() == kVmmFd) {
                const MemoryFdDescriptor& exported = std::get<kVmmFd>(parts);
                CUDYN_TRY_ASSIGN(FileDescriptor fd, duplicate(exported.fd));
                CUDYN_TRY_ASSIGN(memory, import_memory_fd(MemoryFdDescriptor{std::move(fd), exported.info}));
            } else {
                CUDYN_TRY_ASSIGN(memory, import_memory_fabric(std::get<kVmmFabric>(parts)));
            }
            CUDYN_TRY_ASSIGN(state.mapping, map_for_this_device(memory));
            state.mapped = true;
            state.address = state.mapping.device_address() + static_cast<CUdeviceptr>(shared.offset_bytes());
            break;
        }
        default: {
            const PoolPointerDescriptor* pointer = nullptr;
            if (parts.index() == kPoolFd) {
                const auto& pool = std::get<kPoolFd>(parts);
                CUDYN_TRY_ASSIGN(FileDescriptor fd, duplicate(pool.pool.fd));
                CUDYN_TRY_ASSIGN(state.pool, import_pool_fd(PoolFdDescriptor{std::move(fd), pool.pool.info}));
                pointer = &pool.pointer;
            } else {
                const auto& pool = std::get<kPoolFabric>(parts);
                CUDYN_TRY_ASSIGN(state.pool, import_pool_fabric(pool.pool));
                pointer = &pool.pointer;
            }
            CUDYN_TRY_ASSIGN(state.pool_memory, import_pool_pointer(state.pool, *pointer));
            state.address = state.pool_memory.device_address();
            break;
        }
    }
    return ImportedAllocation(std::move(state));
}

Result<void> ImportedAllocation::Traits::release(State& state) {
    CUDYN_TRY(state.opened.close());
    if (state.mapped) {
        CUDYN_TRY(state.mapping.unmap());
        state.mapped = false;
    }
    CUDYN_TRY(state.pool_memory.free());
    CUDYN_TRY(state.pool.destroy());
    state = State{};
    return ok();
}

}  // namespace cudyn
