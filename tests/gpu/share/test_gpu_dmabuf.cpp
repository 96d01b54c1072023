// gpu suite: dma-buf export on the real driver ([gpu][dmabuf]). The
// descriptor is checked as the kernel shows it (fstat size and mode, the
// /proc/self/fd link "/dmabuf:"), freeing the memory while it is open, and
// the refusals: cudyn's own before the driver, and the driver's answers the
// fake models (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md).
// No importer is exercised (that needs an RDMA NIC or another driver).
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/share/dma_buf.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/primary_context.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::DmaBufMapping;
using cudyn::ErrorCode;
using cudyn::FileDescriptor;
using cudyn::Location;
using cudyn_test::kMiB;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// Device 0's capabilities, with DMA_BUF_SUPPORTED required: the H200 reports it.
cudyn::DeviceCapabilities require_dma_buf_support() {
    const auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    INFO("device 0 reports DMA_BUF_SUPPORTED 0");
    REQUIRE(caps.dma_buf);
    return caps;
}

void require_dma_buf(const FileDescriptor& fd, std::size_t bytes) {
    REQUIRE(fd.valid());
    struct stat info {};
    REQUIRE(::fstat(fd.get(), &info) == 0);
    CHECK(static_cast<std::size_t>(info.st_size) == bytes);
    CHECK((info.st_mode & 0777) == 0600);
    char target[256] = {};
    const std::string path = "/proc/self/fd/" + std::to_string(fd.get());
    const ssize_t length = ::readlink(path.c_str(), target, sizeof target - 1);
    REQUIRE(length > 0);
    INFO(target);
    CHECK(std::string(target).rfind("/dmabuf:", 0) == 0);
}

template <typename R>
void require_code(const R& result, ErrorCode code) {
    REQUIRE_FALSE(result.has_value());
    INFO(result.error().describe());
    CHECK(result.error().code == code);
}

CUresult raw_export(CUdeviceptr address, std::size_t bytes, unsigned long long flags = 0) {
    int fd = -1;
    const CUresult result = cudyn::driver().cuMemGetHandleForAddressRange_v11070(
        &fd, address, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, flags);
    if (result == CUDA_SUCCESS) ::close(fd);
    return result;
}

}  // namespace

TEST_CASE("dma-buf: cuMemAlloc and VMM memory export as descriptors that outlive the memory", "[gpu][dmabuf]") {
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    require_dma_buf_support();
    const std::size_t page = page_size();

    FileDescriptor kept;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kMiB));
        require_dma_buf(take(cudyn::export_dma_buf(buffer)), 2 * kMiB);
        require_dma_buf(take(cudyn::export_dma_buf(take(buffer.device_span().subspan(page, page)))), page);
        require_dma_buf(take(cudyn::export_dma_buf(buffer.device_address() + 64 * 1024, 64 * 1024)), 64 * 1024);
        kept = take(cudyn::export_dma_buf(buffer));
        require_ok(buffer.free());  // the driver frees memory whose descriptor is still open
    }
    require_dma_buf(kept, 2 * kMiB);
    require_ok(kept.close());

    // VMM memory mapped on the device, across two allocations of one reservation.
    const auto props = AllocationProperties::device(0);
    const std::size_t granule = take(cudyn::allocation_granularity(props));
    auto range = take(cudyn::AddressRange::reserve(2 * granule));
    auto first = take(cudyn::PhysicalMemory::create(props, granule));
    auto second = take(cudyn::PhysicalMemory::create(props, granule));
    auto a = take(cudyn::MappedRange::map(range, 0, first, {{Location::device(0), AccessFlags::ReadWrite}}));
    auto b = take(cudyn::MappedRange::map(range, granule, second, {{Location::device(0), AccessFlags::ReadWrite}}));
    require_dma_buf(take(cudyn::export_dma_buf(a.device_span())), granule);
    require_dma_buf(take(cudyn::export_dma_buf(range.device_address(), 2 * granule)), 2 * granule);

    // The PCIe (BAR1) mapping is the platform's: an fd where it has one, a real NotSupported where not.
    auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kMiB));
    auto pcie = cudyn::export_dma_buf(buffer, DmaBufMapping::Pcie);
    if (pcie) {
        require_dma_buf(*pcie, 2 * kMiB);
    } else {
        require_code(pcie, ErrorCode::NotSupported);
        CHECK(pcie.error().driver_result == CUDA_ERROR_NOT_SUPPORTED);
    }
}

TEST_CASE("dma-buf: what cudyn refuses first, and the driver's own answers", "[gpu][dmabuf]") {
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto caps = require_dma_buf_support();
    const std::size_t page = page_size();
    auto buffer = take(cudyn::DeviceBuffer<std::byte>::allocate(2 * kMiB));
    auto managed = take(cudyn::ManagedBuffer<std::byte>::allocate(2 * kMiB));
    auto pinned = take(cudyn::PinnedBuffer<std::byte>::allocate(2 * kMiB));
    const CUdeviceptr base = buffer.device_address();
    const auto pinned_address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pinned.data()));

    // cudyn: before the export.
    require_code(cudyn::export_dma_buf(base + 100, page), ErrorCode::InvalidArgument);
    require_code(cudyn::export_dma_buf(base + kMiB, 2 * kMiB), ErrorCode::InvalidArgument);  // past the end
    require_code(cudyn::export_dma_buf(managed.device_span()), ErrorCode::InvalidArgument);
    if (!caps.host_alloc_dma_buf) require_code(cudyn::export_dma_buf(pinned_address, 2 * kMiB), ErrorCode::NotSupported);

    // The driver, as the fake models it.
    CHECK(raw_export(base + 100, page) == CUDA_ERROR_INVALID_VALUE);
    CHECK(raw_export(base + kMiB, 2 * kMiB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(raw_export(managed.device_address(), page) == CUDA_ERROR_INVALID_VALUE);
    if (!caps.host_alloc_dma_buf) CHECK(raw_export(pinned_address, page) == CUDA_ERROR_INVALID_VALUE);
    CHECK(raw_export(base, page, 7) == CUDA_ERROR_NOT_SUPPORTED);

    // Host VMM memory: refused by the driver, and by cudyn where pinned memory is not exportable.
    if (caps.host_numa_virtual_memory_management) {
        const auto host = AllocationProperties::host_numa(0);
        const std::size_t granule = take(cudyn::allocation_granularity(host));
        auto range = take(cudyn::AddressRange::reserve(granule));
        auto memory = take(cudyn::PhysicalMemory::create(host, granule));
        auto mapping = take(cudyn::MappedRange::map(range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
        CHECK(raw_export(mapping.device_address(), page) == CUDA_ERROR_INVALID_VALUE);
        if (!caps.host_alloc_dma_buf) require_code(cudyn::export_dma_buf(mapping.device_span()), ErrorCode::NotSupported);
    }
}
