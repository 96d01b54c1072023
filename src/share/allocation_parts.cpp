// cudyn — the kinds of AllocationDescriptor, each on its own: its records in
// a channel message, read back and checked against the message's record,
// and its import.
#include "share/allocation_parts.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/mapped_range.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "memory/internal.hpp"

#include <string>
#include <utility>

namespace cudyn::detail {

namespace {

constexpr Operation kImport{"import_allocation"};

// A second file descriptor of what a descriptor carries, for an import that
// closes its own.
Result<FileDescriptor> duplicate(const FileDescriptor& fd) {
    if (!fd) return kImport.invalid("the file descriptor is closed (the AllocationDescriptor was moved from)");
    return fd.duplicate();
}

// Imported VMM memory mapped whole, read-write for the current context's
// device, as the importer's ImportedAllocation.
Result<ImportedAllocation> map_for_this_device(const PhysicalMemory& memory, const AllocationDescriptor& descriptor) {
    CUDYN_TRY_ASSIGN(const CUdevice device, current_context_device());
    CUDYN_TRY_ASSIGN(const AddressRange range, AddressRange::reserve(memory.size_bytes()));
    // The mapping keeps the range and the memory: both owners may go here.
    CUDYN_TRY_ASSIGN(MappedRange mapping,
                     MappedRange::map(range, 0, memory,
                                      {{Location::device(static_cast<int>(device)), AccessFlags::ReadWrite}}));
    return RecordAccess::make<ImportedAllocation>(std::move(mapping), descriptor.offset_bytes(),
                                                  static_cast<std::size_t>(descriptor.size_bytes()));
}

// The pointer's part and exporter, and its pool's, must be the message's.
Result<void> check_pool_parts(const PoolInfo& pool, const PoolPointerDescriptor& pointer, const PartsReader& in) {
    CUDYN_TRY(in.agree("pool pointer descriptor", pointer.offset_bytes(), pointer.size_bytes(),
                       pointer.allocation_size_bytes()));
    CUDYN_TRY(in.same_exporter("pool pointer descriptor", pointer.origin().exporter_pid,
                               pointer.origin().exporter_token));
    if (pool.origin != pointer.origin())
        return kReceiveAllocation.invalid("the pool pointer comes from another pool than the pool sent with it");
    return ok();
}

Result<ImportedAllocation> import_pool_memory(MemoryPool pool, const PoolPointerDescriptor& pointer) {
    CUDYN_TRY_ASSIGN(ImportedPoolMemory memory, import_pool_pointer(pool, pointer));
    return RecordAccess::make<ImportedAllocation>(std::move(pool), std::move(memory));
}

}  // namespace

// ---- cuMemAlloc memory: its legacy IPC descriptor ------------------------------------------------

void write_parts(const LegacyIpcParts& parts, PartsWriter& out) { out.record(parts.memory); }

Result<LegacyIpcParts> read_parts(std::in_place_type_t<LegacyIpcParts>, PartsReader& in) {
    CUDYN_TRY_ASSIGN(IpcMemoryDescriptor memory, in.record<IpcMemoryDescriptor>("IpcMemoryDescriptor"));
    CUDYN_TRY(in.agree("legacy IPC descriptor", memory.offset_bytes(), memory.size_bytes(),
                       memory.allocation_size_bytes()));
    const ExporterIdentity& exporter = RecordAccess::fields(memory).exporter;
    CUDYN_TRY(in.same_exporter("legacy IPC descriptor", exporter.pid(), exporter.token()));
    return LegacyIpcParts{memory};
}

Result<ImportedAllocation> import_parts(const LegacyIpcParts& parts, const AllocationDescriptor&) {
    CUDYN_TRY_ASSIGN(ImportedIpcMemory memory, import_ipc_memory(parts.memory));
    return RecordAccess::make<ImportedAllocation>(std::move(memory));
}

// ---- VMM memory as a POSIX file descriptor ------------------------------------------------------

void write_parts(const VmmFdParts& parts, PartsWriter& out) {
    out.record(parts.memory.info);
    out.file_descriptor(parts.memory.fd);
}

Result<VmmFdParts> read_parts(std::in_place_type_t<VmmFdParts>, PartsReader& in) {
    CUDYN_TRY_ASSIGN(const PhysicalMemoryInfo info, in.record<PhysicalMemoryInfo>("PhysicalMemoryInfo"));
    if (info.handle_type != HandleType::PosixFileDescriptor)
        return kReceiveAllocation.invalid("the VMM record names a " + to_string(info.handle_type) +
                                          " handle, the message a POSIX file descriptor");
    const AllocationRecord& record = in.message_record();
    CUDYN_TRY(in.agree("VMM record", record.offset, record.size, info.size_bytes));
    CUDYN_TRY_ASSIGN(FileDescriptor fd, in.file_descriptor());
    return VmmFdParts{MemoryFdDescriptor{std::move(fd), info}};
}

Result<ImportedAllocation> import_parts(const VmmFdParts& parts, const AllocationDescriptor& descriptor) {
    CUDYN_TRY_ASSIGN(FileDescriptor fd, duplicate(parts.memory.fd));
    CUDYN_TRY_ASSIGN(const PhysicalMemory memory,
                     import_memory_fd(MemoryFdDescriptor{std::move(fd), parts.memory.info}));
    return map_for_this_device(memory, descriptor);
}

// ---- VMM memory as a fabric handle --------------------------------------------------------------

void write_parts(const VmmFabricParts& parts, PartsWriter& out) { out.record(parts.memory); }

Result<VmmFabricParts> read_parts(std::in_place_type_t<VmmFabricParts>, PartsReader& in) {
    CUDYN_TRY_ASSIGN(MemoryFabricDescriptor memory, in.record<MemoryFabricDescriptor>("MemoryFabricDescriptor"));
    const AllocationRecord& record = in.message_record();
    CUDYN_TRY(in.agree("fabric descriptor", record.offset, record.size, memory.info().size_bytes));
    return VmmFabricParts{memory};
}

Result<ImportedAllocation> import_parts(const VmmFabricParts& parts, const AllocationDescriptor& descriptor) {
    CUDYN_TRY_ASSIGN(const PhysicalMemory memory, import_memory_fabric(parts.memory));
    return map_for_this_device(memory, descriptor);
}

// ---- pool memory: the pool as a POSIX file descriptor, and the pointer ----------------------------

void write_parts(const PoolFdParts& parts, PartsWriter& out) {
    out.record(parts.pool.info);
    out.record(parts.pointer);
    out.file_descriptor(parts.pool.fd);
}

Result<PoolFdParts> read_parts(std::in_place_type_t<PoolFdParts>, PartsReader& in) {
    CUDYN_TRY_ASSIGN(const PoolInfo pool, in.record<PoolInfo>("PoolInfo"));
    CUDYN_TRY_ASSIGN(PoolPointerDescriptor pointer, in.record<PoolPointerDescriptor>("PoolPointerDescriptor"));
    CUDYN_TRY(check_pool_parts(pool, pointer, in));
    CUDYN_TRY_ASSIGN(FileDescriptor fd, in.file_descriptor());
    return PoolFdParts{PoolFdDescriptor{std::move(fd), pool}, pointer};
}

Result<ImportedAllocation> import_parts(const PoolFdParts& parts, const AllocationDescriptor&) {
    CUDYN_TRY_ASSIGN(FileDescriptor fd, duplicate(parts.pool.fd));
    CUDYN_TRY_ASSIGN(MemoryPool pool, import_pool_fd(PoolFdDescriptor{std::move(fd), parts.pool.info}));
    return import_pool_memory(std::move(pool), parts.pointer);
}

// ---- pool memory: the pool as a fabric handle, and the pointer -------------------------------------

void write_parts(const PoolFabricParts& parts, PartsWriter& out) {
    out.record(parts.pool);
    out.record(parts.pointer);
}

Result<PoolFabricParts> read_parts(std::in_place_type_t<PoolFabricParts>, PartsReader& in) {
    CUDYN_TRY_ASSIGN(PoolFabricDescriptor pool, in.record<PoolFabricDescriptor>("PoolFabricDescriptor"));
    CUDYN_TRY_ASSIGN(PoolPointerDescriptor pointer, in.record<PoolPointerDescriptor>("PoolPointerDescriptor"));
    CUDYN_TRY(check_pool_parts(pool.info(), pointer, in));
    return PoolFabricParts{pool, pointer};
}

Result<ImportedAllocation> import_parts(const PoolFabricParts& parts, const AllocationDescriptor&) {
    CUDYN_TRY_ASSIGN(MemoryPool pool, import_pool_fabric(parts.pool));
    return import_pool_memory(std::move(pool), parts.pointer);
}

}  // namespace cudyn::detail
