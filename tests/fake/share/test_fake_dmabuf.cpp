// dma-buf export (export_dma_buf) on the fake drivers: the descriptor of a
// range, what the library refuses before the driver, and the fake's model of
// the driver's own refusals (an H200 with driver 580,
// docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md).
// The fake's descriptor is a memfd named "dmabuf:": its size and link are
// checked here, never an importer (the fake has none).
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/share/dma_buf.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::DmaBufMapping;
using cudyn::ErrorCode;
using cudyn::FileDescriptor;
using cudyn::Location;
using cudyn_test::activate;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::kMiB;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::ScopedAttribute;
using cudyn_test::take;

namespace {

constexpr std::size_t kPage = 4096;  // the fake runs on x86-64 Linux: 4 KiB host pages
const AccessFlags kRW = AccessFlags::ReadWrite;
constexpr const char* kExport = "cuMemGetHandleForAddressRange";

// What /proc/self/fd says the descriptor is.
std::string fd_link(int fd) {
    char target[256] = {};
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t length = ::readlink(path.c_str(), target, sizeof target - 1);
    REQUIRE(length > 0);
    return std::string(target, static_cast<std::size_t>(length));
}

// A dma-buf descriptor of `bytes`: its size, mode and name as the fake gives them.
void require_dma_buf(const FileDescriptor& fd, std::size_t bytes) {
    REQUIRE(fd.valid());
    struct stat info {};
    REQUIRE(::fstat(fd.get(), &info) == 0);
    CHECK(static_cast<std::size_t>(info.st_size) == bytes);
    CHECK((info.st_mode & 0777) == 0600);
    // A real one reads "/dmabuf:"; the fake's memfd "/memfd:dmabuf: (deleted)".
    CHECK(fd_link(fd.get()).find("dmabuf:") != std::string::npos);
}

void set_dma_buf_pcie(bool on) {
    auto function = reinterpret_cast<PFN_fakecuda_set_dma_buf_pcie>(FakeDriver::loaded().symbol("fakecuda_set_dma_buf_pcie"));
    REQUIRE(function != nullptr);
    function(on ? 1 : 0);
}

// The raw entry, for the fake's own answers.
CUresult raw_export(CUdeviceptr address, std::size_t bytes, unsigned long long flags = 0, int* out = nullptr) {
    int fd = -1;
    const CUresult result = cudyn::driver().cuMemGetHandleForAddressRange_v11070(
        &fd, address, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, flags);
    if (result == CUDA_SUCCESS) {
        if (out != nullptr)
            *out = fd;
        else
            ::close(fd);
    }
    return result;
}

}  // namespace

TEST_CASE("export_dma_buf: a descriptor of the range, which outlives the memory", "[emulated][cuda11][dmabuf]") {
    auto context = activate(0);
    const DriverSnapshot before;
    FileDescriptor kept;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kMiB));
        require_dma_buf(take(cudyn::export_dma_buf(buffer)), 2 * kMiB);
        // Parts of it, as measured: 4 KiB at +4 KiB, 64 KiB at +64 KiB.
        require_dma_buf(take(cudyn::export_dma_buf(take(buffer.device_span().subspan(kPage, kPage)))), kPage);
        require_dma_buf(take(cudyn::export_dma_buf(buffer.device_address() + 64 * 1024, 64 * 1024)), 64 * 1024);
        // A typed, read-only view of the same bytes.
        kept = take(cudyn::export_dma_buf(take(cudyn::DeviceSpan<const std::uint32_t>::from_bytes(
            buffer.device_address(), 2 * kMiB))));
    }  // the memory is freed while `kept` is open: the driver allows it
    require_dma_buf(kept, 2 * kMiB);
    require_ok(kept.close());
    CHECK(before.live_delta() == 0);
}

TEST_CASE("export_dma_buf: VMM memory mapped on a device, every byte of the range mapped",
          "[emulated][cuda11][dmabuf]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        const auto props = AllocationProperties::device(0);
        auto range = take(cudyn::AddressRange::reserve(8 * kMiB));
        auto first = take(cudyn::PhysicalMemory::create(props, 2 * kMiB));
        auto second = take(cudyn::PhysicalMemory::create(props, 2 * kMiB));
        auto a = take(cudyn::MappedRange::map(range, 0, first, {{Location::device(0), kRW}}));
        auto b = take(cudyn::MappedRange::map(range, 2 * kMiB, second, {{Location::device(0), kRW}}));
        require_dma_buf(take(cudyn::export_dma_buf(a.device_span())), 2 * kMiB);
        // Two allocations of identical properties, contiguous: one range.
        require_dma_buf(take(cudyn::export_dma_buf(range.device_address() + kMiB, 2 * kMiB)), 2 * kMiB);

        // Into the unmapped part of the reservation: only the driver knows, and refuses.
        auto hole = cudyn::export_dma_buf(range.device_address() + 2 * kMiB, 4 * kMiB);
        require_error(hole, ErrorCode::Driver, "every byte in the range is mapped");
        CHECK(hole.error().driver_result == CUDA_ERROR_INVALID_VALUE);

        // Next to memory of other properties: refused too.
        auto shareable = take(cudyn::PhysicalMemory::create(
            props.with_handle_types(cudyn::HandleType::PosixFileDescriptor), 2 * kMiB));
        auto c = take(cudyn::MappedRange::map(range, 4 * kMiB, shareable, {{Location::device(0), kRW}}));
        require_error(cudyn::export_dma_buf(range.device_address() + 2 * kMiB, 4 * kMiB), ErrorCode::Driver,
                      "CUDA_ERROR_INVALID_VALUE");
        require_dma_buf(take(cudyn::export_dma_buf(c.device_span())), 2 * kMiB);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("export_dma_buf: bad input is InvalidArgument before the export, nothing leaked",
          "[emulated][cuda11][dmabuf]") {
    auto context = activate(0);
    auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(4 * kPage));
    auto managed = take(cudyn::ManagedBuffer<std::byte>::allocate(4 * kPage));
    void* pageable = std::aligned_alloc(kPage, 2 * kPage);
    REQUIRE(pageable != nullptr);
    const CUdeviceptr base = buffer.device_address();
    const DriverSnapshot before({kExport, "cuPointerGetAttributes"});

    // Without asking the driver anything.
    require_error(cudyn::export_dma_buf(cudyn::DeviceBuffer<std::byte>()), ErrorCode::InvalidArgument,
                  "address is null");
    require_error(cudyn::export_dma_buf(base, 0), ErrorCode::InvalidArgument, "bytes must be non-zero");
    require_error(cudyn::export_dma_buf(base + 100, kPage), ErrorCode::InvalidArgument,
                  "is not a multiple of the host page size");
    require_error(cudyn::export_dma_buf(base, kPage + 1), ErrorCode::InvalidArgument,
                  "are not a multiple of the host page size");
    require_error(cudyn::export_dma_buf(CUdeviceptr{0} - kPage, 2 * kPage), ErrorCode::InvalidArgument,
                  "wrap around");
    require_error(cudyn::export_dma_buf(base, kPage, static_cast<DmaBufMapping>(6)), ErrorCode::InvalidArgument,
                  "mapping 6");
    CHECK(before.calls_since("cuPointerGetAttributes") == 0);

    // After asking where the memory is, before the export.
    require_error(cudyn::export_dma_buf(base + kPage, 4 * kPage), ErrorCode::InvalidArgument,
                  "run past the end of the allocation");
    require_error(cudyn::export_dma_buf(managed.device_span()), ErrorCode::InvalidArgument, "managed memory");
    require_error(cudyn::export_dma_buf(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pageable)), kPage),
                  ErrorCode::InvalidArgument, "not memory the driver tracks");
    CHECK(before.calls_since(kExport) == 0);
    CHECK(before.live_delta() == 0);
    std::free(pageable);
}

TEST_CASE("export_dma_buf: NotSupported where the device or the platform lacks it", "[emulated][cuda11][dmabuf]") {
    auto context = activate(0);
    const DriverSnapshot before({kExport});
    auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kPage));
    auto pinned = take(cudyn::PinnedBuffer<std::byte>::allocate(2 * kPage));
    const auto pinned_address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pinned.data()));

    // Pinned host memory: HOST_ALLOC_DMA_BUF_SUPPORTED is 0, as on the H200.
    require_error(cudyn::export_dma_buf(pinned_address, 2 * kPage), ErrorCode::NotSupported,
                  "HOST_ALLOC_DMA_BUF_SUPPORTED is 0 on device 0");
    {
        const ScopedAttribute no_dma_buf(0, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0);
        require_error(cudyn::export_dma_buf(buffer), ErrorCode::NotSupported, "DMA_BUF_SUPPORTED is 0 on device 0");
    }
    CHECK(before.calls_since(kExport) == 0);

    // The PCIe (BAR1) mapping: the driver says whether this machine has it.
    auto pcie = cudyn::export_dma_buf(buffer, DmaBufMapping::Pcie);
    require_error(pcie, ErrorCode::NotSupported, "DmaBufMapping::Default is");
    CHECK(pcie.error().driver_result == CUDA_ERROR_NOT_SUPPORTED);
    set_dma_buf_pcie(true);
    auto mapped = cudyn::export_dma_buf(buffer, DmaBufMapping::Pcie);
    set_dma_buf_pcie(false);
    require_dma_buf(take(std::move(mapped)), 2 * kPage);

    // A device that exports pinned host memory: the driver takes it.
    {
        const ScopedAttribute host_alloc(0, CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED, 1);
        require_dma_buf(take(cudyn::export_dma_buf(pinned_address, 2 * kPage)), 2 * kPage);
    }
    CHECK(before.live_delta() == 2);  // the two buffers
}

TEST_CASE("the fake refuses dma-buf exports as the driver does", "[emulated][cuda11][dmabuf]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kMiB));
        auto managed = take(cudyn::ManagedBuffer<std::byte>::allocate(2 * kMiB));
        auto pinned = take(cudyn::PinnedBuffer<std::byte>::allocate(2 * kMiB));
        const CUdeviceptr base = buffer.device_address();
        int fd = -1;
        REQUIRE(raw_export(base, 2 * kMiB, 0, &fd) == CUDA_SUCCESS);
        require_dma_buf(FileDescriptor(fd), 2 * kMiB);
        CHECK(raw_export(base + kPage, kPage) == CUDA_SUCCESS);
        CHECK(raw_export(base + 100, kPage) == CUDA_ERROR_INVALID_VALUE);        // not page aligned
        CHECK(raw_export(base, kPage + 100) == CUDA_ERROR_INVALID_VALUE);
        CHECK(raw_export(base, 0) == CUDA_ERROR_INVALID_VALUE);
        CHECK(raw_export(base + kMiB, 2 * kMiB) == CUDA_ERROR_INVALID_VALUE);    // past the allocation's end
        CHECK(raw_export(managed.device_address(), kPage) == CUDA_ERROR_INVALID_VALUE);
        CHECK(raw_export(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pinned.data())), kPage) ==
              CUDA_ERROR_INVALID_VALUE);  // HOST_ALLOC_DMA_BUF_SUPPORTED is 0
        CHECK(raw_export(base, kPage, CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) == CUDA_ERROR_NOT_SUPPORTED);
        CHECK(raw_export(base, kPage, 7) == CUDA_ERROR_NOT_SUPPORTED);
        CHECK(cudyn::driver().cuMemGetHandleForAddressRange_v11070(&fd, base, kPage,
                                                                  static_cast<CUmemRangeHandleType>(2), 0) ==
              CUDA_ERROR_INVALID_VALUE);
        {
            const ScopedAttribute no_dma_buf(0, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0);
            CHECK(raw_export(base, kPage) == CUDA_ERROR_NOT_SUPPORTED);
        }
        // Host VMM memory (a CUDA 12 attribute: the emulated fake only).
        if (FakeDriver::loaded().variant() == "emulated") {
            auto range = take(cudyn::AddressRange::reserve(2 * kMiB));
            auto host = take(cudyn::PhysicalMemory::create(AllocationProperties::host_numa(0), 2 * kMiB));
            auto mapping = take(cudyn::MappedRange::map(range, 0, host, {{Location::device(0), kRW}}));
            CHECK(raw_export(mapping.device_address(), kPage) == CUDA_ERROR_INVALID_VALUE);
        }
        // No current context.
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSetCurrent_v4000, static_cast<CUcontext>(nullptr)));
        CHECK(raw_export(base, kPage) == CUDA_ERROR_INVALID_CONTEXT);
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSetCurrent_v4000, context.handle()));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("export_dma_buf: host VMM memory is refused by the driver, not by cudyn's checks", "[emulated][dmabuf]") {
    auto context = activate(0);
    auto range = take(cudyn::AddressRange::reserve(2 * kMiB));
    auto host = take(cudyn::PhysicalMemory::create(AllocationProperties::host_numa(0), 2 * kMiB));
    auto mapping = take(cudyn::MappedRange::map(range, 0, host, {{Location::device(0), kRW}}));
    // It reads as host memory: where pinned memory is not exportable, NotSupported.
    require_error(cudyn::export_dma_buf(mapping.device_span()), ErrorCode::NotSupported, "host-VMM memory never");
    // Where it is, the driver itself refuses host VMM memory.
    const ScopedAttribute host_alloc(0, CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED, 1);
    auto refused = cudyn::export_dma_buf(mapping.device_span());
    require_error(refused, ErrorCode::Driver, kExport);
    CHECK(refused.error().driver_result == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("legacy driver: export_dma_buf is NotSupported, naming the entry", "[legacy][dmabuf]") {
    auto context = activate(0);
    auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kPage));
    require_error(cudyn::export_dma_buf(buffer), ErrorCode::NotSupported, kExport);
}
