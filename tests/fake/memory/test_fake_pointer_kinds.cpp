// The fake's answers about what an address is ([share-any], raw driver
// entries, no cudyn module): pointer attributes, cuMemRetainAllocationHandle
// and the exports that take an address, kind of memory by kind of memory, as
// an H200 with driver 580 answered them
// (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md, "Pointer
// attributes by kind of memory"); and the reference count of a retained VMM
// handle. export_allocation decides from these answers, so they must be the
// real driver's for its tests to mean anything.
//
// Each address is 4 KiB (or 64 B) inside its allocation, as measured.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/loader/driver_table.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/loader/loader.hpp"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

using cudyn_test::activate;
using cudyn_test::FakeDriver;
using cudyn_test::kMiB;

namespace {

const cudyn::DriverTable& cu() { return cudyn::driver(); }

constexpr std::size_t kGranule = 2 * kMiB;  // the fake's VMM granularity

// One attribute through cuPointerGetAttribute, with the driver's answer.
template <typename T>
CUresult attribute(CUpointer_attribute name, CUdeviceptr address, T* value) {
    *value = T{};
    return cu().cuPointerGetAttribute_v4000(static_cast<void*>(value), name, address);
}

template <typename T>
T read(CUpointer_attribute name, CUdeviceptr address) {
    T value{};
    REQUIRE(attribute(name, address, &value) == CUDA_SUCCESS);
    return value;
}

// What one row of the measured table holds.
struct Kind {
    unsigned int memory_type;
    bool managed;
    bool legacy_ipc;
    CUdeviceptr range_start;
    std::size_t range_size;
    unsigned long long handle_types;
    CUmemoryPool pool;
};

void check_row(CUdeviceptr address, const Kind& kind) {
    CHECK(read<unsigned int>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) == kind.memory_type);
    CHECK(read<bool>(CU_POINTER_ATTRIBUTE_IS_MANAGED, address) == kind.managed);
    CHECK(read<bool>(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, address) == kind.legacy_ipc);
    CHECK(read<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address) == kind.range_start);
    CHECK(read<std::size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, address) == kind.range_size);
    CHECK(read<unsigned long long>(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, address) == kind.handle_types);
    CHECK(read<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, address) == kind.pool);
}

// cuMemRetainAllocationHandle succeeds for VMM memory only.
CUresult retain(CUdeviceptr address, CUmemGenericAllocationHandle* handle) {
    if (cu().cuMemRetainAllocationHandle_v11000 == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    return cu().cuMemRetainAllocationHandle_v11000(handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)));
}

void check_not_vmm(CUdeviceptr address) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult rc = retain(address, &handle);
    if (rc == CUDA_ERROR_NOT_SUPPORTED && cu().cuMemRetainAllocationHandle_v11000 == nullptr) return;  // no entry (10.1)
    CHECK(rc == CUDA_ERROR_INVALID_VALUE);
}

// The mapping the driver reports for an address: [base, base + size).
std::pair<CUdeviceptr, std::size_t> mapping_of(CUdeviceptr address) {
    void* base = nullptr;
    REQUIRE(attribute(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, address, &base) == CUDA_SUCCESS);
    return {static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(base)),
            read<std::size_t>(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, address)};
}

// A reservation of four granules with two granules of `handle_types` memory
// mapped (read-write for device 0) at the second granule, as measured.
struct VmmLayout {
    CUdeviceptr reservation = 0;
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr mapped = 0;

    explicit VmmLayout(CUmemAllocationHandleType handle_types) {
        REQUIRE(cu().cuMemAddressReserve_v10020(&reservation, 4 * kGranule, 0, 0, 0) == CUDA_SUCCESS);
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        prop.requestedHandleTypes = handle_types;
        REQUIRE(cu().cuMemCreate_v10020(&handle, 2 * kGranule, &prop, 0) == CUDA_SUCCESS);
        mapped = reservation + kGranule;
        REQUIRE(cu().cuMemMap_v10020(mapped, 2 * kGranule, 0, handle, 0) == CUDA_SUCCESS);
        CUmemAccessDesc access{};
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = 0;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        REQUIRE(cu().cuMemSetAccess_v10020(mapped, 2 * kGranule, &access, 1) == CUDA_SUCCESS);
    }
    ~VmmLayout() {
        if (mapped != 0) CHECK(cu().cuMemUnmap_v10020(mapped, 2 * kGranule) == CUDA_SUCCESS);
        if (handle != 0) CHECK(cu().cuMemRelease_v10020(handle) == CUDA_SUCCESS);
        CHECK(cu().cuMemAddressFree_v10020(reservation, 4 * kGranule) == CUDA_SUCCESS);
    }
    VmmLayout(const VmmLayout&) = delete;
    VmmLayout& operator=(const VmmLayout&) = delete;
};

}  // namespace

TEST_CASE("cuMemAlloc memory: device, legacy-IPC capable, the allocation as its range, a 2 MiB block as its "
          "mapping, no pool, not VMM; cuIpcGetMemHandle takes an interior address",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    CUdeviceptr base = 0;
    REQUIRE(cu().cuMemAlloc_v3020(&base, kMiB) == CUDA_SUCCESS);
    const CUdeviceptr inside = base + 4096;
    check_row(inside, {CU_MEMORYTYPE_DEVICE, false, true, base, kMiB, 0, nullptr});
    // The block the driver maps it in is not the allocation: a library that
    // took MAPPING_* for cuMemAlloc memory would get the offset wrong.
    const auto [block, block_size] = mapping_of(inside);
    CHECK(block_size % (2 * kMiB) == 0);
    CHECK(block <= base);
    CHECK(block + block_size >= base + kMiB);
    CHECK((block != base || block_size != kMiB));
    check_not_vmm(inside);
    // The handle names the whole allocation, whatever address inside it was given.
    CUipcMemHandle at_base{};
    CUipcMemHandle at_inside{};
    CHECK(cu().cuIpcGetMemHandle_v4010(&at_base, base) == CUDA_SUCCESS);
    CHECK(cu().cuIpcGetMemHandle_v4010(&at_inside, inside) == CUDA_SUCCESS);
    CHECK(std::memcmp(&at_base, &at_inside, sizeof at_base) == 0);
    std::vector<std::uint8_t> host(64);
    CUipcMemHandle outside{};
    CHECK(cu().cuIpcGetMemHandle_v4010(&outside, reinterpret_cast<std::uintptr_t>(host.data())) ==
          CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cu().cuMemFree_v3020(base) == CUDA_SUCCESS);
}

TEST_CASE("host, managed and registered memory: their memory types, their ranges, no legacy handle, no pool, "
          "not VMM", "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    void* pinned = nullptr;
    REQUIRE(cu().cuMemHostAlloc_v2020(&pinned, kMiB, 0) == CUDA_SUCCESS);
    const auto pinned_base = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pinned));
    check_row(pinned_base + 4096, {CU_MEMORYTYPE_HOST, false, false, pinned_base, kMiB, 0, nullptr});
    check_not_vmm(pinned_base + 4096);

    CUdeviceptr managed = 0;
    REQUIRE(cu().cuMemAllocManaged_v6000(&managed, kMiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    check_row(managed + 4096, {CU_MEMORYTYPE_DEVICE, true, false, managed, kMiB, 0, nullptr});
    check_not_vmm(managed + 4096);

    std::vector<std::uint8_t> host(kMiB + 4096);
    const auto aligned = (reinterpret_cast<std::uintptr_t>(host.data()) + 4095) / 4096 * 4096;
    REQUIRE(cu().cuMemHostRegister_v6050(reinterpret_cast<void*>(aligned), kMiB, 0) == CUDA_SUCCESS);
    check_row(aligned + 4096, {CU_MEMORYTYPE_HOST, false, false, aligned, kMiB, 0, nullptr});
    check_not_vmm(aligned + 4096);

    CHECK(cu().cuMemHostUnregister_v4000(reinterpret_cast<void*>(aligned)) == CUDA_SUCCESS);
    CHECK(cu().cuMemFree_v3020(managed) == CUDA_SUCCESS);
    CHECK(cu().cuMemFreeHost_v2000(pinned) == CUDA_SUCCESS);
}

TEST_CASE("memory the driver does not know (plain malloc): every attribute INVALID_VALUE, the batched query zeros",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    std::vector<std::uint8_t> plain(8192);
    const auto address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(plain.data()) + 64);
    unsigned int type = 7;
    CHECK(attribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address, &type) == CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr start = 0;
    CHECK(attribute(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address, &start) == CUDA_ERROR_INVALID_VALUE);
    bool legacy = false;
    CHECK(attribute(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, address, &legacy) == CUDA_ERROR_INVALID_VALUE);
    CUmemoryPool pool = nullptr;
    CHECK(attribute(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, address, &pool) == CUDA_ERROR_INVALID_VALUE);
    check_not_vmm(address);
    // cuPointerGetAttributes documents the other answer: success, zeros.
    type = 7;
    CUpointer_attribute names[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void* values[] = {&type};
    CHECK(cu().cuPointerGetAttributes_v7000(1, names, values, address) == CUDA_SUCCESS);
    CHECK(type == 0);
}

TEST_CASE("VMM memory: the reservation as its range, the mapping as its mapping, its handle types, "
          "cuMemRetainAllocationHandle; a reserved address with nothing mapped is unknown",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    {
        const VmmLayout vmm(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        const CUdeviceptr inside = vmm.mapped + 4096;
        check_row(inside, {CU_MEMORYTYPE_DEVICE, false, false, vmm.reservation, 4 * kGranule,
                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, nullptr});
        const auto [base, size] = mapping_of(inside);
        CHECK(base == vmm.mapped);
        CHECK(size == 2 * kGranule);
        CUmemGenericAllocationHandle retained = 0;
        REQUIRE(retain(inside, &retained) == CUDA_SUCCESS);
        CUmemAllocationProp prop{};
        REQUIRE(cu().cuMemGetAllocationPropertiesFromHandle_v10020(&prop, retained) == CUDA_SUCCESS);
        CHECK(prop.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        CHECK(prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE);
        CHECK(cu().cuMemRelease_v10020(retained) == CUDA_SUCCESS);

        // The granules around the mapping are reserved, not mapped: unknown.
        for (const CUdeviceptr unmapped : {vmm.reservation + 64, vmm.reservation + 3 * kGranule + 64}) {
            unsigned int type = 7;
            CHECK(attribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, unmapped, &type) == CUDA_ERROR_INVALID_VALUE);
            CUdeviceptr start = 0;
            CHECK(attribute(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, unmapped, &start) == CUDA_ERROR_INVALID_VALUE);
            CUmemGenericAllocationHandle none = 0;
            CHECK(retain(unmapped, &none) == CUDA_ERROR_INVALID_VALUE);
        }
    }
    const VmmLayout plain(CU_MEM_HANDLE_TYPE_NONE);
    check_row(plain.mapped + 64, {CU_MEMORYTYPE_DEVICE, false, false, plain.reservation, 4 * kGranule, 0, nullptr});
    CUmemGenericAllocationHandle retained = 0;
    REQUIRE(retain(plain.mapped + 64, &retained) == CUDA_SUCCESS);
    CHECK(cu().cuMemRelease_v10020(retained) == CUDA_SUCCESS);
}

TEST_CASE("a retained VMM handle is a reference: the memory stays until every handle is released",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    const long live = fake.live_allocations();
    const auto bytes_in_use = [] {
        return cudyn_test::ipc::probe<PFN_fakecuda_device_bytes_in_use>("fakecuda_device_bytes_in_use")(0);
    };
    const unsigned long long before = bytes_in_use();
    auto* vmm = new VmmLayout(CU_MEM_HANDLE_TYPE_NONE);
    cudyn_test::fill32(vmm->mapped, 2 * kGranule, 0xA11CE5u);
    CUmemGenericAllocationHandle retained = 0;
    REQUIRE(retain(vmm->mapped + 4096, &retained) == CUDA_SUCCESS);
    // The creator's handle goes, and the mapping: the retained one keeps the memory.
    REQUIRE(cu().cuMemUnmap_v10020(vmm->mapped, 2 * kGranule) == CUDA_SUCCESS);
    vmm->mapped = 0;
    REQUIRE(cu().cuMemRelease_v10020(vmm->handle) == CUDA_SUCCESS);
    vmm->handle = 0;
    CHECK(bytes_in_use() == before + 2 * kGranule);
    // Mapped again from the retained handle: the same bytes.
    const CUdeviceptr again = vmm->reservation;
    REQUIRE(cu().cuMemMap_v10020(again, 2 * kGranule, 0, retained, 0) == CUDA_SUCCESS);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    REQUIRE(cu().cuMemSetAccess_v10020(again, 2 * kGranule, &access, 1) == CUDA_SUCCESS);
    CHECK(cudyn_test::all_equal(again, 2 * kGranule, 0xA11CE5u));
    REQUIRE(cu().cuMemUnmap_v10020(again, 2 * kGranule) == CUDA_SUCCESS);
    CHECK(bytes_in_use() == before + 2 * kGranule);
    // The last reference: the memory goes.
    REQUIRE(cu().cuMemRelease_v10020(retained) == CUDA_SUCCESS);
    CHECK(bytes_in_use() == before);
    CHECK(cu().cuMemRelease_v10020(retained) == CUDA_ERROR_INVALID_VALUE);
    delete vmm;
    CHECK(fake.live_allocations() == live);
}

TEST_CASE("pool memory: device, no legacy handle, the allocation as its range, the pool's chunk as its mapping, "
          "the pool and its handle types, not VMM; only the allocation's start exports",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    CUstream stream = nullptr;
    REQUIRE(cu().cuStreamCreate_v2000(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUmemoryPool default_pool = nullptr;
    REQUIRE(cu().cuDeviceGetDefaultMemPool_v11020(&default_pool, 0) == CUDA_SUCCESS);
    CUdeviceptr from_default = 0;
    REQUIRE(cu().cuMemAllocAsync_v11020(&from_default, kMiB, stream) == CUDA_SUCCESS);
    check_row(from_default + 4096, {CU_MEMORYTYPE_DEVICE, false, false, from_default, kMiB, 0, default_pool});
    check_not_vmm(from_default + 4096);
    const auto [chunk, chunk_size] = mapping_of(from_default + 4096);
    CHECK(chunk <= from_default);
    CHECK(chunk + chunk_size >= from_default + kMiB);
    CHECK(chunk_size % (2 * kMiB) == 0);

    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool shareable = nullptr;
    REQUIRE(cu().cuMemPoolCreate_v11020(&shareable, &props) == CUDA_SUCCESS);
    CUdeviceptr from_shareable = 0;
    REQUIRE(cu().cuMemAllocFromPoolAsync_v11020(&from_shareable, kMiB, shareable, stream) == CUDA_SUCCESS);
    check_row(from_shareable + 64, {CU_MEMORYTYPE_DEVICE, false, false, from_shareable, kMiB,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, shareable});
    check_not_vmm(from_shareable + 64);
    int fd = -1;  // the pool first: the driver exports pointers of an exported pool only
    REQUIRE(cu().cuMemPoolExportToShareableHandle_v11020(&fd, shareable, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
            CUDA_SUCCESS);
    const cudyn::FileDescriptor exported(fd);
    CUmemPoolPtrExportData data{};
    CHECK(cu().cuMemPoolExportPointer_v11020(&data, from_shareable + 64) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cu().cuMemPoolExportPointer_v11020(&data, from_shareable) == CUDA_SUCCESS);

    REQUIRE(cu().cuMemFreeAsync_v11020(from_shareable, stream) == CUDA_SUCCESS);
    REQUIRE(cu().cuMemFreeAsync_v11020(from_default, stream) == CUDA_SUCCESS);
    REQUIRE(cu().cuStreamSynchronize_v2000(stream) == CUDA_SUCCESS);
    CHECK(cu().cuMemPoolDestroy_v11020(shareable) == CUDA_SUCCESS);
    CHECK(cu().cuStreamDestroy_v4000(stream) == CUDA_SUCCESS);
}
