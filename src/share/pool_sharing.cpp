// cudyn — sharing pools and pool pointers between processes: the two wire
// records, export and import of a pool's POSIX descriptor, export and import
// of pointers, and the importer's owner of an imported pointer.
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include "pool/internal.hpp"
#include "core/internal.hpp"
#include "core/internal.hpp"
#include "core/process_identity.hpp"
#include "core/wire_format.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr const char* kPoolInfo = "PoolInfo";
constexpr const char* kPointer = "PoolPointerDescriptor";

Result<void> validate_origin(const PoolOrigin& origin, const std::string& what) {
    if (origin.exporter_pid == 0) return Error::invalid_argument(what + ": exporter process id is 0");
    if (origin.exporter_token == 0) return Error::invalid_argument(what + ": exporter token is 0");
    if (origin.pool_id == 0) return Error::invalid_argument(what + ": pool id is 0");
    return ok();
}

}  // namespace

namespace detail {

// A PoolInfo's fields, which the fabric descriptor carries too.
template <typename Wire, typename Info>
constexpr void share_info_fields(Wire& wire, Info& info) {
    wire.u64(info.origin.exporter_pid);
    wire.u64(info.origin.exporter_token);
    wire.u64(info.origin.pool_id);
    wire.u32(info.device);
    wire.reserved(4);
}

template <>
struct WireLayout<PoolInfo> {
    static constexpr char kMagic[9] = "CUDYNPLS";
    static constexpr const char* kName = kPoolInfo;
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& info) {
        share_info_fields(wire, info);
    }
};

template <>
struct WireLayout<PoolFabricDescriptor> {
    static constexpr char kMagic[9] = "CUDYNPLF";
    static constexpr const char* kName = "PoolFabricDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        share_info_fields(wire, descriptor.info_);
        wire.handle(descriptor.handle_);
    }
};

template <>
struct WireLayout<PoolPointerDescriptor> {
    static constexpr char kMagic[9] = "CUDYNPPT";
    static constexpr const char* kName = kPointer;
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        wire.u64(descriptor.origin_.exporter_pid);
        wire.u64(descriptor.origin_.exporter_token);
        wire.u64(descriptor.origin_.pool_id);
        wire.u64(descriptor.allocation_size_);
        wire.u64(descriptor.offset_);
        wire.u64(descriptor.size_);
        wire.handle(descriptor.handle_);
    }
};

}  // namespace detail

// ---- PoolInfo ------------------------------------------------------------------------

Result<void> PoolInfo::validate() const {
    CUDYN_TRY(validate_origin(origin, kPoolInfo));
    if (device < 0) return Error::invalid_argument(std::string(kPoolInfo) + ": device " + std::to_string(device));
    return ok();
}

PoolInfo::Bytes PoolInfo::to_bytes() const noexcept { return detail::write_record(*this); }

Result<PoolInfo> PoolInfo::from_bytes(const void* data, std::size_t size) {
    PoolInfo info;
    CUDYN_TRY(detail::read_record(data, size, info));
    CUDYN_TRY(info.validate());
    return info;
}

// ---- the pool -----------------------------------------------------------------------------

namespace {

// The checks both pool exports make before the driver.
Result<void> check_pool_exportable(const MemoryPool& pool, HandleType type, const char* operation) {
    if (pool.empty()) return Error::invalid_argument(std::string(operation) + ": the pool is empty");
    if (pool.imported())
        return Error::invalid_argument(std::string(operation) +
                                       ": the pool was imported from another process; share the exporter's");
    if (!includes(pool.handle_types(), type))
        return Error::invalid_argument(std::string(operation) + ": the pool (" + pool.location().describe() +
                                       ", handles " + to_string(pool.handle_types()) + ") was created without the " +
                                       to_string(type) +
                                       " handle type; request it at creation (PoolProperties::with_handle_types)");
    return ok();
}

PoolInfo share_info(const MemoryPool& pool) {
    PoolInfo info;
    info.origin = pool.origin();
    info.device = pool.location().kind() == LocationKind::Device ? pool.location().id() : 0;
    return info;
}

}  // namespace

Result<PoolFdDescriptor> export_pool_fd(const MemoryPool& pool) {
    constexpr const char* kOperation = "export_pool_fd";
    CUDYN_TRY(check_pool_exportable(pool, HandleType::PosixFileDescriptor, kOperation));
#if defined(_WIN32)
    return Error::not_supported("cuMemPoolExportToShareableHandle", "export_pool_fd: POSIX descriptors on Windows");
#else
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolExportToShareableHandle_v11020));
    int fd = -1;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolExportToShareableHandle_v11020, static_cast<void*>(&fd),
                          pool.handle(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ULL));
    detail::PoolAccess::mark_exported(pool);
    return PoolFdDescriptor{FileDescriptor(fd), share_info(pool)};
#endif
}

Result<MemoryPool> import_pool_fd(PoolFdDescriptor exported) {
    // `exported` is this function's own: its descriptor closes when it returns.
    constexpr const char* kOperation = "import_pool_fd";
    CUDYN_TRY(exported.info.validate());
    if (!exported.fd) return Error::invalid_argument(std::string(kOperation) + ": the descriptor is empty");
    if (exported.info.origin.is_this_process())
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pool was exported by this process (use the MemoryPool itself)");
#if defined(_WIN32)
    return Error::not_supported("cuMemPoolImportFromShareableHandle", "import_pool_fd: POSIX descriptors on Windows");
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
    PoolFabricDescriptor descriptor;
    CUDYN_TRY(detail::read_record(data, size, descriptor));
    CUDYN_TRY(descriptor.info_.validate());
    if (descriptor.handle_ == FabricHandle())
        return Error::invalid_argument("PoolFabricDescriptor: the handle is all zero");
    return descriptor;
}

Result<PoolFabricDescriptor> export_pool_fabric(const MemoryPool& pool) {
    constexpr const char* kOperation = "export_pool_fabric";
    CUDYN_TRY(check_pool_exportable(pool, HandleType::Fabric, kOperation));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolExportToShareableHandle_v11020));
    // Measured on an H200 with driver 580 and no IMEX channel: the pool
    // export is refused (CUDA_ERROR_NOT_PERMITTED), and cuMemPoolDestroy of
    // that pool then crashes inside the driver. So the export is only tried
    // where the fabric probe (a trial on a VMM allocation, which fails
    // cleanly) says this machine shares fabric handles.
    const int ordinal = pool.location().kind() == LocationKind::Device ? pool.location().id() : 0;
    CUDYN_TRY_ASSIGN(const Device device, Device::get(ordinal));
    CUDYN_TRY_ASSIGN(const bool fabric, probe_fabric_support(device));
    if (!fabric)
        return Error::not_supported("cuMemPoolExportToShareableHandle",
                                    std::string(kOperation) +
                                        ": this machine does not share fabric handles (probe_fabric_support: no IMEX "
                                        "channel, or the device lacks them); share the pool with export_pool_fd");
    PoolFabricDescriptor descriptor;
    if (auto exported = call_driver(&DriverTable::cuMemPoolExportToShareableHandle_v11020,
                                    static_cast<void*>(descriptor.handle_.driver_output()), pool.handle(),
                                    CU_MEM_HANDLE_TYPE_FABRIC, 0ULL);
        !exported) {
        // Refused after all: the pool must not be destroyed (see above); it
        // is let go of without the driver when its owner goes.
        detail::keep_pool_from_destroy(pool.handle());
        return detail::fabric_error(std::move(exported).error(), kOperation);
    }
    detail::PoolAccess::mark_exported(pool);
    descriptor.info_ = share_info(pool);
    return descriptor;
}

Result<MemoryPool> import_pool_fabric(const PoolFabricDescriptor& descriptor) {
    constexpr const char* kOperation = "import_pool_fabric";
    if (descriptor.info().origin.is_this_process())
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pool was exported by this process (use the MemoryPool itself)");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolImportFromShareableHandle_v11020));
    CUmemFabricHandle handle = descriptor.handle().to_cu();
    CUmemoryPool pool = nullptr;
    if (auto imported = call_driver(&DriverTable::cuMemPoolImportFromShareableHandle_v11020, &pool,
                                    static_cast<void*>(&handle), CU_MEM_HANDLE_TYPE_FABRIC, 0ULL);
        !imported)
        return detail::fabric_error(std::move(imported).error(), kOperation);
    return detail::PoolAccess::imported(pool, Location::device(descriptor.info().device), descriptor.info().origin,
                                       HandleType::Fabric);
}

// ---- pointers -----------------------------------------------------------------------------

PoolPointerDescriptor::Bytes PoolPointerDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<PoolPointerDescriptor> PoolPointerDescriptor::from_bytes(const void* data, std::size_t size) {
    PoolPointerDescriptor descriptor;
    CUDYN_TRY(detail::read_record(data, size, descriptor));
    const std::string what(kPointer);
    CUDYN_TRY(validate_origin(descriptor.origin_, what));
    if (descriptor.size_ == 0) return Error::invalid_argument(what + ": shared size is 0");
    if (descriptor.offset_ > descriptor.allocation_size_ || descriptor.size_ > descriptor.allocation_size_ - descriptor.offset_)
        return Error::invalid_argument(what + ": offset " + std::to_string(descriptor.offset_) + " + size " +
                                       std::to_string(descriptor.size_) + " runs past the allocation of " +
                                       std::to_string(descriptor.allocation_size_) + " bytes");
    return descriptor;
}

Result<PoolPointerDescriptor> export_pool_pointer(const MemoryPool& pool, CUdeviceptr address, std::size_t bytes) {
    constexpr const char* kOperation = "export_pool_pointer";
    if (pool.empty()) return Error::invalid_argument(std::string(kOperation) + ": the pool is empty");
    if (pool.imported())
        return Error::invalid_argument(std::string(kOperation) + ": the pool was imported; only its exporter shares "
                                                                 "pointers from it");
    if (pool.handle_types() == HandleType::None)
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pool was created without a shareable handle type");
    if (address == 0 || bytes == 0)
        return Error::invalid_argument(std::string(kOperation) + ": a null address or a size of 0");
    CUDYN_TRY(detail::check_address_range(address, bytes, kOperation));
    // The driver refuses (INVALID_VALUE) the pointer of a pool never exported.
    if (!pool.exported())
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pool was not exported yet; export the pool (export_pool_fd / "
                                       "export_pool_fabric) before its pointers");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolExportPointer_v11020));
    CUdeviceptr base = 0;
    std::size_t allocation = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAddressRange_v3020, &base, &allocation, address));
    const std::uint64_t offset = address - base;
    if (offset > allocation || bytes > allocation - offset)
        return Error::invalid_argument(std::string(kOperation) + ": " + std::to_string(bytes) + " bytes at offset " +
                                       std::to_string(offset) + " run past the allocation of " +
                                       std::to_string(allocation));
    CUmemoryPool owner = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&owner),
                          CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, base));
    if (owner != pool.handle())
        return Error::invalid_argument(std::string(kOperation) + ": the memory was not allocated from this pool");
    PoolPointerDescriptor descriptor;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolExportPointer_v11020, descriptor.handle_.driver_output(), base));
    descriptor.origin_ = pool.origin();
    descriptor.allocation_size_ = allocation;
    descriptor.offset_ = offset;
    descriptor.size_ = bytes;
    return descriptor;
}

Result<ImportedPoolMemory> import_pool_pointer(const MemoryPool& pool, const PoolPointerDescriptor& descriptor) {
    constexpr const char* kOperation = "import_pool_pointer";
    if (pool.empty()) return Error::invalid_argument(std::string(kOperation) + ": the pool is empty");
    if (descriptor.origin().is_this_process())
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pointer was exported by this process (use the memory directly)");
    if (!pool.imported())
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pool was not imported from another process (import_pool_fd first)");
    if (pool.origin() != descriptor.origin())
        return Error::invalid_argument(std::string(kOperation) +
                                       ": the pointer comes from another pool than the one given (pool " +
                                       std::to_string(descriptor.origin().pool_id) + " of process " +
                                       std::to_string(descriptor.origin().exporter_pid) + ")");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemPoolImportPointer_v11020));
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUmemPoolPtrExportData data = descriptor.handle().to_cu();
    CUdeviceptr base = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemPoolImportPointer_v11020, &base, pool.handle(), &data));
    return ImportedPoolMemory(ImportedPoolMemory::Traits::State{
        base, static_cast<std::size_t>(descriptor.offset_bytes()), static_cast<std::size_t>(descriptor.size_bytes()),
        std::move(context)});
}

Result<void> ImportedPoolMemory::Traits::release(State& state) {
    // cuMemFree does not wait for work on pool memory (cuda.h says so): the
    // context's work is waited for first, as closing a legacy IPC handle
    // does, so that no kernel still reads the import when it goes.
    CUDYN_TRY(state.context.release_into([&state]() -> Result<void> {
        CUDYN_TRY(call_driver(&DriverTable::cuCtxSynchronize_v2000));
        return call_driver(&DriverTable::cuMemFree_v3020, state.base);
    }));
    state = State{};
    return ok();
}

}  // namespace cudyn
