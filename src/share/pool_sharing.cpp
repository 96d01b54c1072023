// cudyn — sharing pools and pool pointers between processes: the wire
// records, export and import of a pool (POSIX descriptor or fabric handle),
// export and import of pointers, and the importer's owner of an imported
// pointer.
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "pool/internal.hpp"
#include "share/internal.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kPoolInfo{"PoolInfo"};
constexpr detail::Operation kPointer{"PoolPointerDescriptor"};
constexpr detail::Operation kExportFd{"export_pool_fd"};
constexpr detail::Operation kImportFd{"import_pool_fd"};
constexpr detail::Operation kExportFabric{"export_pool_fabric"};
constexpr detail::Operation kImportFabric{"import_pool_fabric"};
constexpr detail::Operation kExportPointer{"export_pool_pointer"};
constexpr detail::Operation kImportPointer{"import_pool_pointer"};

// The exporter's identity the reader checked; the pool must be named too.
Result<void> check_pool_id(const PoolOrigin& origin, const detail::Operation& record) {
    if (origin.pool_id == 0) return record.invalid("pool id is 0");
    return ok();
}

}  // namespace

namespace detail {

// A pool's origin on the wire: exporter pid and token, pool id.
template <typename Wire, typename Origin>
constexpr void origin_fields(Wire& wire, Origin& origin) {
    wire.exporter(origin.exporter_pid, origin.exporter_token);
    wire.u64(origin.pool_id);
}

// A PoolInfo's fields, which the fabric descriptor carries too.
template <typename Wire, typename Info>
constexpr void pool_info_fields(Wire& wire, Info& info) {
    origin_fields(wire, info.origin);
    wire.u32(info.device);
    wire.reserved(4);
}

template <>
struct WireLayout<PoolInfo> {
    static constexpr char kMagic[9] = "CUDYNPLS";
    static constexpr const char* kName = kPoolInfo.name();
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& info) {
        pool_info_fields(wire, info);
    }
    static Result<void> validate(const PoolInfo& info) { return info.validate(); }
};

template <>
struct WireLayout<PoolFabricDescriptor> {
    static constexpr char kMagic[9] = "CUDYNPLF";
    static constexpr const char* kName = "PoolFabricDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        auto& f = RecordAccess::fields(descriptor);
        pool_info_fields(wire, f.info);
        wire.handle(f.handle);
    }
    static Result<void> validate(const PoolFabricDescriptor& descriptor) { return descriptor.info().validate(); }
};

template <>
struct WireLayout<PoolPointerDescriptor> {
    static constexpr char kMagic[9] = "CUDYNPPT";
    static constexpr const char* kName = kPointer.name();
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        auto& f = RecordAccess::fields(descriptor);
        origin_fields(wire, f.origin);
        wire.u64(f.allocation_size);
        wire.u64(f.offset);
        wire.u64(f.size);
        wire.handle(f.handle);
    }
    static Result<void> validate(const PoolPointerDescriptor& descriptor) {
        const auto& f = RecordAccess::fields(descriptor);
        CUDYN_TRY(check_pool_id(f.origin, kPointer));
        return check_shared_part(kPointer, f.offset, f.size, f.allocation_size);
    }
};

namespace {

// One entry per live ImportedPoolMemory.
PoolHandleList& pool_imports() {
    static auto* imports = new PoolHandleList();  // never destroyed: owners die at exit too
    return *imports;
}

}  // namespace

void note_pool_import(CUmemoryPool pool) {
    pool_imports().add(pool);
}

void forget_pool_import(CUmemoryPool pool) noexcept {
    (void)pool_imports().take(pool);
}

bool has_pool_imports(CUmemoryPool pool) {
    return pool_imports().contains(pool);
}

}  // namespace detail

// ---- PoolInfo ------------------------------------------------------------------------

Result<void> PoolInfo::validate() const {
    if (origin.exporter_pid == 0) return kPoolInfo.invalid("exporter process id is 0");
    if (origin.exporter_token == 0) return kPoolInfo.invalid("exporter token is 0");
    CUDYN_TRY(check_pool_id(origin, kPoolInfo));
    if (device < 0) return kPoolInfo.invalid("device " + std::to_string(device));
    return ok();
}

PoolInfo::Bytes PoolInfo::to_bytes() const noexcept { return detail::write_record(*this); }

Result<PoolInfo> PoolInfo::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<PoolInfo>(data, size);
}

// ---- the pool -----------------------------------------------------------------------------

namespace {

// The checks both pool exports make before the driver.
Result<void> check_pool_exportable(const MemoryPool& pool, HandleType type, const detail::Operation& operation) {
    if (pool.empty()) return operation.invalid("the pool is empty");
    if (pool.imported()) return operation.invalid("the pool was imported from another process; share the exporter's");
    if (!includes(pool.handle_types(), type))
        return operation.invalid("the pool (" + pool.location().describe() + ", handles " +
                                 to_string(pool.handle_types()) + ") was created without the " + to_string(type) +
                                 " handle type; request it at creation (PoolProperties::with_handle_types)");
    return ok();
}

PoolInfo pool_info(const MemoryPool& pool) {
    PoolInfo info;
    info.origin = pool.origin();
    info.device = pool.location().kind() == LocationKind::Device ? pool.location().id() : 0;
    return info;
}

// What both pool imports check before the driver.
Result<void> check_pool_importable(const PoolInfo& info, const detail::Operation& operation) {
    CUDYN_TRY(info.validate());
    if (info.origin.is_this_process())
        return operation.invalid("the pool was exported by this process (use the MemoryPool itself)");
    return ok();
}

}  // namespace

Result<PoolFdDescriptor> export_pool_fd(const MemoryPool& pool) {
    CUDYN_TRY(check_pool_exportable(pool, HandleType::PosixFileDescriptor, kExportFd));
#if defined(_WIN32)
    return kExportFd.not_supported("cuMemPoolExportToShareableHandle", "POSIX descriptors on Windows");
#else
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolExportToShareableHandle_v11020));
    int fd = -1;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolExportToShareableHandle_v11020, static_cast<void*>(&fd),
                          pool.handle(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ULL));
    detail::PoolAccess::mark_exported(pool);
    return PoolFdDescriptor{FileDescriptor(fd), pool_info(pool)};
#endif
}

Result<MemoryPool> import_pool_fd(PoolFdDescriptor exported) {
    // `exported` is this function's own: its descriptor closes when it returns.
    if (!exported.fd) return kImportFd.invalid("the file descriptor is empty");
    CUDYN_TRY(check_pool_importable(exported.info, kImportFd));
#if defined(_WIN32)
    return kImportFd.not_supported("cuMemPoolImportFromShareableHandle", "POSIX descriptors on Windows");
#else
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolImportFromShareableHandle_v11020));
    CUmemoryPool pool = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolImportFromShareableHandle_v11020, &pool,
                          reinterpret_cast<void*>(static_cast<std::intptr_t>(exported.fd.get())),
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ULL));
    return detail::PoolAccess::imported(pool, Location::device(exported.info.device), exported.info.origin,
                                        HandleType::PosixFileDescriptor);
#endif
}

// ---- the pool as a fabric handle ------------------------------------------------------------

PoolFabricDescriptor::Bytes PoolFabricDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<PoolFabricDescriptor> PoolFabricDescriptor::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<PoolFabricDescriptor>(data, size);
}

Result<PoolFabricDescriptor> export_pool_fabric(const MemoryPool& pool) {
    CUDYN_TRY(check_pool_exportable(pool, HandleType::Fabric, kExportFabric));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolExportToShareableHandle_v11020));
    // Without an IMEX channel the driver refuses the pool export
    // (CUDA_ERROR_NOT_PERMITTED), and cuMemPoolDestroy of that pool then
    // crashed inside the driver. So the export is only tried where the fabric
    // probe (a trial on a VMM allocation, which fails cleanly) says this
    // machine shares fabric handles.
    const int ordinal = pool.location().kind() == LocationKind::Device ? pool.location().id() : 0;
    CUDYN_TRY_ASSIGN(const Device device, Device::get(ordinal));
    CUDYN_TRY_ASSIGN(const bool fabric, probe_fabric_support(device));
    if (!fabric)
        return kExportFabric.not_supported("cuMemPoolExportToShareableHandle",
                                           "this machine does not share fabric handles (probe_fabric_support: no "
                                           "IMEX channel, or the device lacks them); share the pool with "
                                           "export_pool_fd");
    auto descriptor = detail::RecordAccess::make<PoolFabricDescriptor>();
    auto& fields = detail::RecordAccess::fields(descriptor);
    if (auto exported = call_driver(&DriverTable::cuMemPoolExportToShareableHandle_v11020,
                                    static_cast<void*>(fields.handle.driver_output()), pool.handle(),
                                    CU_MEM_HANDLE_TYPE_FABRIC, 0ULL);
        !exported) {
        // Refused after all: the pool must not be destroyed (see above); it
        // is let go of without the driver when its owner goes.
        detail::keep_pool_from_destroy(pool.handle());
        return detail::fabric_error(std::move(exported).error(), kExportFabric.name());
    }
    detail::PoolAccess::mark_exported(pool);
    fields.info = pool_info(pool);
    return descriptor;
}

Result<MemoryPool> import_pool_fabric(const PoolFabricDescriptor& descriptor) {
    CUDYN_TRY(check_pool_importable(descriptor.info(), kImportFabric));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolImportFromShareableHandle_v11020));
    CUmemFabricHandle handle = descriptor.handle().to_cu();
    CUmemoryPool pool = nullptr;
    if (auto imported = call_driver(&DriverTable::cuMemPoolImportFromShareableHandle_v11020, &pool,
                                    static_cast<void*>(&handle), CU_MEM_HANDLE_TYPE_FABRIC, 0ULL);
        !imported)
        return detail::fabric_error(std::move(imported).error(), kImportFabric.name());
    return detail::PoolAccess::imported(pool, Location::device(descriptor.info().device), descriptor.info().origin,
                                        HandleType::Fabric);
}

// ---- pointers -----------------------------------------------------------------------------

PoolPointerDescriptor::Bytes PoolPointerDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<PoolPointerDescriptor> PoolPointerDescriptor::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<PoolPointerDescriptor>(data, size);
}

Result<PoolPointerDescriptor> export_pool_pointer(const MemoryPool& pool, CUdeviceptr address, std::size_t bytes) {
    if (pool.empty()) return kExportPointer.invalid("the pool is empty");
    if (pool.imported())
        return kExportPointer.invalid("the pool was imported; only its exporter shares pointers from it");
    if (pool.handle_types() == HandleType::None)
        return kExportPointer.invalid("the pool was created without a shareable handle type");
    if (address == 0 || bytes == 0) return kExportPointer.invalid("a null address or a size of 0");
    CUDYN_TRY(detail::check_address_range(address, bytes, kExportPointer.name()));
    // The driver refuses (INVALID_VALUE) the pointer of a pool never exported.
    if (!pool.exported())
        return kExportPointer.invalid("the pool was not exported yet; export the pool (export_pool_fd / "
                                      "export_pool_fabric) before its pointers");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolExportPointer_v11020));
    CUdeviceptr base = 0;
    std::size_t allocation = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation, address));
    const std::uint64_t offset = address - base;
    CUDYN_TRY(detail::check_inside_allocation(kExportPointer, offset, bytes, allocation));
    CUmemoryPool owner = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&owner),
                          CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, base));
    if (owner != pool.handle()) return kExportPointer.invalid("the memory was not allocated from this pool");
    auto descriptor = detail::RecordAccess::make<PoolPointerDescriptor>();
    auto& fields = detail::RecordAccess::fields(descriptor);
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolExportPointer_v11020, fields.handle.driver_output(), base));
    fields.origin = pool.origin();
    fields.allocation_size = allocation;
    fields.offset = offset;
    fields.size = bytes;
    return descriptor;
}

Result<ImportedPoolMemory> import_pool_pointer(const MemoryPool& pool, const PoolPointerDescriptor& descriptor) {
    if (pool.empty()) return kImportPointer.invalid("the pool is empty");
    if (descriptor.origin().is_this_process())
        return kImportPointer.invalid("the pointer was exported by this process (use the memory directly)");
    if (!pool.imported())
        return kImportPointer.invalid("the pool was not imported from another process (import_pool_fd first)");
    if (pool.origin() != descriptor.origin())
        return kImportPointer.invalid("the pointer comes from another pool than the one given (pool " +
                                      std::to_string(descriptor.origin().pool_id) + " of process " +
                                      std::to_string(descriptor.origin().exporter_pid) + ")");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolImportPointer_v11020));
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUmemPoolPtrExportData data = descriptor.handle().to_cu();
    CUdeviceptr base = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolImportPointer_v11020, &base, pool.handle(), &data));
    detail::note_pool_import(pool.handle());
    const int device = context.empty() ? -1 : static_cast<int>(context.device());
    ImportedPoolMemory::Held held{base, static_cast<std::size_t>(descriptor.offset_bytes()),
                                  static_cast<std::size_t>(descriptor.size_bytes()), pool.handle(), std::move(context),
                                  nullptr, false, false, {}, {}};
    held.ledger = detail::ledger_open(MemoryKind::PoolImported, device, held.size, static_cast<std::uintptr_t>(base));
    held.listed = detail::import_open(
        LiveImport{ImportKind::PoolMemory, device, static_cast<std::uintptr_t>(base + held.offset), held.size});
    return ImportedPoolMemory(std::move(held));
}

Result<void> ImportedPoolMemory::Held::release() {
    // Both forms free with cuMemFreeAsync. An import freed with cuMemFree
    // (which the driver also accepts) was reported by compute-sanitizer's
    // leak check as never freed at the importer's exit, while one freed with
    // cuMemFreeAsync was not.
    // Without a stream: the context's work is waited for first (a free does
    // not wait for work on pool memory, cuda.h says so), as closing a legacy
    // IPC handle does, so that no kernel still reads the import when it goes;
    // then the free runs on the context's default stream and is waited for,
    // because the exporter may free the memory only once every importer's
    // free has completed.
    // With a stream: it waits for nothing; the stream's earlier work is
    // ordered before it, and the program orders other streams' work (the
    // rule StreamOrderedBuffer follows). The context is made current for it
    // too: a default-stream handle means the current context's stream.
    return context.release_into([this]() -> Result<void> {
        if (!free_issued) {
            if (stream_ordered) return call_driver(&DriverTable::cuMemFreeAsync_v11020, base, stream);
            CUDYN_TRY(call_driver(&DriverTable::cuCtxSynchronize_v2000));
            CUDYN_TRY(call_driver(&DriverTable::cuMemFreeAsync_v11020, base, CUstream{nullptr}));
            // The driver holds the import until the free has run: a failed
            // wait keeps it held here, and a retry only waits.
            free_issued = true;
        }
        return call_driver(&DriverTable::cuStreamSynchronize_v2000, CUstream{nullptr});
    }, [this] {
        detail::forget_pool_import(pool);
        *this = Held{};
    });
}

void ImportedPoolMemory::Held::abandon() noexcept { detail::forget_pool_import(pool); }

}  // namespace cudyn
