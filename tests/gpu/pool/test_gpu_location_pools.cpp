// gpu suite: pools by location on the real driver. A pool at the host (or the
// device's nearest host NUMA node) where the device reports one, written by
// a kernel and read by the host through the same address; the location's
// default and current pools; a managed pool where the driver makes one.
// Skips (exit 77) where no device is present: see tests/support/test_main.cpp.
#include "support/catch.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using cudyn::Location;
using cudyn::MemoryPool;
using cudyn::PoolProperties;
using cudyn::StreamOrderedBuffer;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

constexpr std::size_t kWords = std::size_t{1} << 20;  // 4 MiB of uint32_t

// A kernel fills a buffer from `pool` that device 0 was granted; the host
// reads every word through the buffer's own address (host pool memory).
void require_kernel_writes_host_reads(const MemoryPool& pool) {
    auto kernels = take(cudyn_test::PtxKernels::load());
    auto stream = take(cudyn::Stream::create());
    require_ok(pool.set_access(cudyn::AccessGrant{Location::device(0), cudyn::AccessFlags::ReadWrite}));
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    require_ok(kernels.fill_u32(buffer.device_address(), kWords, 0xA5A5F00Du, stream.handle()));
    require_ok(stream.synchronize());
    const auto* words = reinterpret_cast<const std::uint32_t*>(static_cast<std::uintptr_t>(buffer.device_address()));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kWords; ++i) wrong += words[i] != 0xA5A5F00Du;
    CHECK(wrong == 0);
    CHECK(take(pool.usage()).used_bytes >= kWords * sizeof(std::uint32_t));
}

// The typed host copies that the driver (and so the fake) refuses for host
// pool memory, and the unified one it takes; then every cudyn copy path on
// that memory, each checked by the host reading the bytes directly.
void require_copies_work(const MemoryPool& pool) {
    using cudyn::DriverTable;
    using cudyn::call_driver;
    constexpr std::size_t kCount = 4096;
    auto stream = take(cudyn::Stream::create());
    require_ok(pool.set_access(cudyn::AccessGrant{Location::device(0), cudyn::AccessFlags::ReadWrite}));
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kCount, stream));
    require_ok(stream.synchronize());
    const CUdeviceptr address = buffer.device_address();
    const std::size_t bytes = buffer.size_bytes();
    const auto* words = reinterpret_cast<const std::uint32_t*>(static_cast<std::uintptr_t>(address));
    const auto host_sees = [&](const std::vector<std::uint32_t>& expected) {
        return std::vector<std::uint32_t>(words, words + kCount) == expected;
    };
    std::vector<std::uint32_t> up(kCount);
    std::iota(up.begin(), up.end(), 1u);
    std::vector<std::uint32_t> down(kCount, 0);

    // What the fake models (tests/fakecuda: host_pool_block).
    const auto refused = [](const cudyn::Result<void>& called) {
        INFO((called ? std::string("taken") : called.error().describe()));
        return !called && called.error().driver_result == CUDA_ERROR_INVALID_VALUE;
    };
    CHECK(refused(call_driver(&DriverTable::cuMemcpyHtoD_v3020, address, up.data(), bytes)));
    CHECK(refused(call_driver(&DriverTable::cuMemcpyHtoDAsync_v3020, address, up.data(), bytes, stream.handle())));
    CHECK(refused(call_driver(&DriverTable::cuMemcpyDtoH_v3020, down.data(), address, bytes)));
    CHECK(refused(call_driver(&DriverTable::cuMemcpyDtoHAsync_v3020, down.data(), address, bytes, stream.handle())));
    require_ok(call_driver(&DriverTable::cuMemcpyAsync_v4000, address,
                           static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(up.data())), bytes,
                           stream.handle()));
    require_ok(stream.synchronize());
    CHECK(host_sees(up));

    // The buffer's copies, without and with a stream.
    std::vector<std::uint32_t> other(kCount, 0xB0B0u);
    require_ok(buffer.copy_from(cudyn::HostSpan<const std::uint32_t>(other)));
    CHECK(host_sees(other));
    require_ok(buffer.copy_from(cudyn::HostSpan<const std::uint32_t>(up), stream));
    require_ok(stream.synchronize());
    CHECK(host_sees(up));
    require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(down)));
    CHECK(down == up);
    std::fill(down.begin(), down.end(), 0u);
    require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(down), stream));
    require_ok(stream.synchronize());
    CHECK(down == up);
    // Device to device, with device memory from the device's pool.
    auto device_side = take(StreamOrderedBuffer<std::uint32_t>::allocate(kCount, stream));
    require_ok(device_side.copy_from(cudyn::DeviceSpan<const std::uint32_t>(buffer.device_span()), stream));
    require_ok(buffer.fill(0u, stream));
    require_ok(buffer.copy_from(cudyn::DeviceSpan<const std::uint32_t>(device_side.device_span()), stream));
    require_ok(stream.synchronize());
    CHECK(host_sees(up));
    // A view of it: the typed copy refused, then the unified one.
    const auto span = buffer.device_span();
    require_ok(span.copy_from(cudyn::HostSpan<const std::uint32_t>(other)));
    CHECK(host_sees(other));
    std::fill(down.begin(), down.end(), 0u);
    require_ok(span.copy_to(cudyn::HostSpan<std::uint32_t>(down), stream));
    require_ok(stream.synchronize());
    CHECK(down == other);
    // A copy plan.
    cudyn::CopyPlan plan;
    require_ok(plan.add(span, cudyn::HostSpan<const std::uint32_t>(up)));
    (void)take(plan.execute(stream));
    require_ok(stream.synchronize());
    CHECK(host_sees(up));
    require_ok(device_side.free());
    require_ok(buffer.free());
    require_ok(stream.synchronize());
}

}  // namespace

TEST_CASE("host pool memory: every cudyn copy path reads and writes it", "[gpu][location-pools]") {
    const auto device = take(cudyn::Device::get(0));
    auto context = take(cudyn::PrimaryContext::activate(device));
    const auto caps = take(cudyn::probe_capabilities(device));
    INFO("device 0 reports no host memory pools");
    REQUIRE(caps.host_memory_pools);
    require_copies_work(take(MemoryPool::create(PoolProperties(Location::host()))));
    const int node = take(device.attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));
    if (node >= 0 && caps.host_numa_memory_pools)
        require_copies_work(take(MemoryPool::create(PoolProperties(Location::host_numa(node)))));
}

TEST_CASE("host and host NUMA pools where the device reports them, NotSupported where not",
          "[gpu][location-pools]") {
    const auto device = take(cudyn::Device::get(0));
    auto context = take(cudyn::PrimaryContext::activate(device));
    const auto caps = take(cudyn::probe_capabilities(device));
    const int node = take(device.attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));
    struct Case {
        Location where;
        bool reported;
    };
    std::vector<Case> cases{{Location::host(), caps.host_memory_pools}};
    if (node >= 0) cases.push_back({Location::host_numa(node), caps.host_numa_memory_pools});
    for (const Case& c : cases) {
        auto pool = MemoryPool::create(PoolProperties(c.where));
        INFO(c.where.describe() << " reported " << c.reported << ": "
                                << (pool ? std::string("created") : pool.error().describe()));
        if (!c.reported) {
            CHECK_FALSE(pool.has_value());
            continue;
        }
        REQUIRE(pool.has_value());
        require_kernel_writes_host_reads(*pool);
        // The location's default and current pool, and this one made current.
        auto by_default = MemoryPool::default_for(c.where);
        if (!by_default) {
            CHECK(by_default.error().code == cudyn::ErrorCode::NotSupported);  // a driver before CUDA 13
            continue;
        }
        CHECK(take(MemoryPool::current_for(c.where)).handle() == by_default->handle());
        require_ok(pool->set_current_for(c.where));
        CHECK(take(MemoryPool::current_for(c.where)).handle() == pool->handle());
        require_ok(by_default->set_current_for(c.where));
        CHECK(take(MemoryPool::current_for(c.where)).handle() == by_default->handle());
    }
    // A device location through the location-keyed calls: the device's own pool.
    CHECK(take(MemoryPool::default_for(Location::device(0))).handle() == take(MemoryPool::default_for(device)).handle());
}

TEST_CASE("a managed pool: buffers a kernel writes and the host reads, where the driver makes one",
          "[gpu][location-pools]") {
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    auto pool = MemoryPool::create(PoolProperties::device(0).with_memory_type(cudyn::PoolMemoryType::Managed));
    INFO((pool ? std::string("created") : pool.error().describe()));
    if (!pool) {
        // Drivers without managed pools (before 13.0, or without HMM) refuse as unsupported.
        const bool unsupported = pool.error().code == cudyn::ErrorCode::NotSupported ||
                                 pool.error().driver_result == CUDA_ERROR_NOT_SUPPORTED;
        CHECK(unsupported);
        return;
    }
    auto kernels = take(cudyn_test::PtxKernels::load());
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(*pool, kWords, stream));
    require_ok(kernels.fill_u32(buffer.device_address(), kWords, 7u, stream.handle()));
    require_ok(stream.synchronize());
    const auto* words = reinterpret_cast<const std::uint32_t*>(static_cast<std::uintptr_t>(buffer.device_address()));
    CHECK(words[0] == 7u);
    CHECK(words[kWords - 1] == 7u);
}
