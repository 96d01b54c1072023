// gpu suite: memory pools and stream-ordered buffers on the real driver.
// Kernels (tests/support/ptx_kernels.hpp) write and read pool memory on the
// buffer's streams; the free following the stream last used is checked by a
// kernel still writing when the buffer is dropped; addresses are reused in
// stream order; the current pool serves cuMemAllocAsync.
// Skips (exit 77) where no device is present: see tests/support/test_main.cpp.
#include "support/catch.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using cudyn::MemoryPool;
using cudyn::PoolProperties;
using cudyn::StreamOrderedBuffer;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

constexpr std::size_t kWords = std::size_t{16} << 20;  // 64 MiB of uint32_t

cudyn::PrimaryContext activate_device0() { return take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0)))); }

void require_pools() {
    const auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    REQUIRE(caps.memory_pools);
}

}  // namespace

TEST_CASE("a pool's buffers hold what kernels and copies put there, and its usage says so", "[gpu][pool]") {
    auto context = activate_device0();
    require_pools();
    auto kernels = take(cudyn_test::PtxKernels::load());
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    require_ok(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
    auto stream = take(cudyn::Stream::create());

    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    require_ok(kernels.fill_u32(buffer.device_address(), kWords, 5, stream.handle()));
    require_ok(kernels.add_u32(buffer.device_address(), kWords, 2, stream.handle()));
    buffer.use_on(stream);
    std::vector<std::uint32_t> back(kWords);
    require_ok(buffer.copy_to(back));  // synchronous: after the kernels, in the buffer's stream order
    CHECK(back == std::vector<std::uint32_t>(kWords, 7));

    const auto usage = take(pool.usage());
    CHECK(usage.used_bytes >= kWords * 4);
    CHECK(usage.reserved_bytes >= usage.used_bytes);

    // Freed and allocated again on the same stream: the pool hands the same
    // memory back at once (stream-ordered reuse), and it works.
    const CUdeviceptr address = buffer.device_address();
    require_ok(buffer.free());
    auto again = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    CHECK(again.device_address() == address);
    require_ok(again.fill(3u));
    require_ok(again.copy_to(back));
    CHECK(back == std::vector<std::uint32_t>(kWords, 3));
    require_ok(again.free());
    require_ok(stream.synchronize());
    CHECK(take(pool.usage()).used_bytes == 0);
    require_ok(pool.trim_to(0));
    CHECK(take(pool.usage()).reserved_bytes == 0);
}

TEST_CASE("the free follows a kernel still writing on another stream", "[gpu][pool]") {
    auto context = activate_device0();
    require_pools();
    auto kernels = take(cudyn_test::PtxKernels::load());
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    require_ok(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
    auto allocating = take(cudyn::Stream::create());
    auto working = take(cudyn::Stream::create());
    {
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, allocating));
        require_ok(allocating.synchronize());
        // Writes 0xBAD after 50 ms: the buffer is dropped long before that.
        require_ok(kernels.delayed_fill_u32(buffer.device_address(), kWords, 0xBAD, 50'000'000, working.handle()));
        buffer.use_on(working);
    }  // freed on `working`, after the kernel
    // A new allocation on the first stream must not receive memory the
    // kernel is still going to write (it would if the free had gone there).
    auto fresh = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, allocating));
    require_ok(fresh.fill(7u));
    require_ok(working.synchronize());
    std::vector<std::uint32_t> back(kWords);
    require_ok(fresh.copy_to(back));
    CHECK(back == std::vector<std::uint32_t>(kWords, 7));
}

TEST_CASE("the current pool serves cuMemAllocAsync; the default pool comes back", "[gpu][pool]") {
    auto context = activate_device0();
    require_pools();
    const auto device = take(cudyn::Device::get(0));
    const auto fallback = take(MemoryPool::default_for(device));
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    require_ok(pool.set_current_for(device));
    CHECK(take(MemoryPool::current_for(device)).handle() == pool.handle());
    auto stream = take(cudyn::Stream::create());
    {
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(1 << 20, stream));
        require_ok(buffer.fill(1u));
        CHECK(take(pool.usage()).used_bytes >= (4u << 20));
    }
    require_ok(stream.synchronize());
    require_ok(fallback.set_current_for(device));
    CHECK(take(MemoryPool::current_for(device)).handle() == fallback.handle());
}

TEST_CASE("a buffer outlives the program's context retain and is freed in its own", "[gpu][pool]") {
    StreamOrderedBuffer<std::uint32_t> buffer;
    {
        auto context = activate_device0();
        require_pools();
        buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(1 << 20, cudyn::Stream::legacy_default()));
        require_ok(buffer.fill(8u));
    }
    std::vector<std::uint32_t> back(1 << 20);
    {
        auto context = activate_device0();
        require_ok(buffer.copy_to(back));
    }
    CHECK(back == std::vector<std::uint32_t>(1 << 20, 8));
    require_ok(buffer.free());
}

TEST_CASE("fabric pools follow the fabric probe: exported where it says yes, NotSupported where no",
          "[gpu][pool]") {
    auto context = activate_device0();
    require_pools();
    const auto device = take(cudyn::Device::get(0));
    const bool fabric = take(cudyn::probe_fabric_support(device));
    auto pool = MemoryPool::create(PoolProperties::device(0).with_handle_types(cudyn::HandleType::Fabric));
    if (!pool) {
        INFO(pool.error().describe());
        CHECK_FALSE(fabric);
        CHECK(pool.error().code == cudyn::ErrorCode::NotSupported);
        return;
    }
    auto shared = cudyn::export_pool_fabric(*pool);
    INFO((shared ? std::string("exported") : shared.error().describe()));
    if (fabric)
        CHECK(shared.has_value());
    else
        CHECK((!shared && shared.error().code == cudyn::ErrorCode::NotSupported));
}

TEST_CASE("CUDA 13's managed pools: a pool where the driver has one, NotSupported where not", "[gpu][pool]") {
    auto context = activate_device0();
    for (const cudyn::Location where : {cudyn::Location::device(0), cudyn::Location::host()}) {
        auto pool = MemoryPool::managed_default_for(where);
        INFO(where.describe() << ": " << (pool ? std::string("a pool") : pool.error().describe()));
        if (!pool) {
            CHECK(pool.error().code == cudyn::ErrorCode::NotSupported);
            continue;
        }
        CHECK_FALSE(pool->owned());
        CHECK(pool->handle() != nullptr);
        CHECK(take(MemoryPool::managed_current_for(where)).handle() == pool->handle());
    }
}
