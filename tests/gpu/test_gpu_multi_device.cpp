// gpu suite, two GPUs ([gpu][multi-gpu]; the Meson test sets
// CUDYN_TEST_REQUIRE_DEVICES=2, so one GPU skips it with exit 77): a GPU-0
// pool granted to GPU 1, a stream-ordered buffer from it written by a GPU-1
// kernel and freed on GPU 1's stream, a copy plan between the GPUs, and a
// GrowableBuffer destroyed while kernels on both GPUs still write it. Without
// a peer path the cases that need one check cudyn's NotSupported and skip.
#include "support/catch.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok, kMiB

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

using cudyn::AccessFlags;
using cudyn::Location;
using cudyn::MemoryPool;
using cudyn::PoolProperties;
using cudyn_test::PtxKernels;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

constexpr std::size_t kWords = std::size_t{4} << 20;  // 16 MiB of uint32_t

cudyn::PrimaryContext activate(int ordinal) {
    return take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(ordinal))));
}

void synchronize() { require_ok(cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000)); }

// A GPU-0 pool with GPU 1 granted read-write; without a peer path, checks
// the refusal and skips (exit 77) rather than passing.
MemoryPool pool_shared_with_gpu1() {
    REQUIRE(take(cudyn::Device::count()) >= 2);  // the Meson test skips below two devices
    REQUIRE(take(cudyn::probe_capabilities(take(cudyn::Device::get(0)))).memory_pools);
    auto pool = take(MemoryPool::create(PoolProperties::device(0)));
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);
    auto granted = pool.set_access({Location::device(1), AccessFlags::ReadWrite});
    if (!take(take(cudyn::Device::get(1)).can_access_peer(take(cudyn::Device::get(0))))) {
        REQUIRE_FALSE(granted.has_value());
        CHECK(granted.error().code == cudyn::ErrorCode::NotSupported);
        std::printf("SKIP: GPU 1 cannot access GPU 0 (cuDeviceCanAccessPeer is 0): %s\n",
                    granted.error().describe().c_str());
        std::exit(77);
    }
    require_ok(granted);
    return pool;
}

}  // namespace

TEST_CASE("a GPU-0 pool grants GPU 1 access and revokes it", "[gpu][multi-gpu]") {
    auto context = activate(0);
    auto pool = pool_shared_with_gpu1();
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::ReadWrite);
    CHECK(take(pool.access(Location::device(0))) == AccessFlags::ReadWrite);
    require_ok(pool.set_access({Location::device(1), AccessFlags::None}));
    CHECK(take(pool.access(Location::device(1))) == AccessFlags::None);
}

TEST_CASE("a GPU-1 kernel writes a stream-ordered buffer from a GPU-0 pool; the free follows it", "[gpu][multi-gpu]") {
    auto on_zero = activate(0);
    auto pool = pool_shared_with_gpu1();
    require_ok(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
    auto allocating = take(cudyn::Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, allocating));
    require_ok(allocating.synchronize());
    {
        auto on_one = activate(1);
        auto kernels = take(PtxKernels::load());  // in GPU 1's context
        auto peer_stream = take(cudyn::Stream::create());
        require_ok(kernels.fill_u32(buffer.device_address(), kWords, 41u, peer_stream.handle()));
        require_ok(kernels.add_u32(buffer.device_address(), kWords, 1u, peer_stream.handle()));
        buffer.use_on(peer_stream);
        std::vector<std::uint32_t> back(kWords);
        require_ok(buffer.copy_to(back, peer_stream));
        // A kernel still writing when the buffer goes: the free waits on its stream.
        require_ok(kernels.delayed_fill_u32(buffer.device_address(), kWords, 9u, 50'000'000, peer_stream.handle()));
        require_ok(buffer.free());
        require_ok(peer_stream.synchronize());
        CHECK(back == std::vector<std::uint32_t>(kWords, 42u));
        synchronize();  // GPU 1's context is healthy
        require_ok(on_zero.make_current());
    }
    CHECK(take(pool.usage()).used_bytes == 0);
    synchronize();
}

TEST_CASE("a copy plan copies GPU 0 to GPU 1 and back", "[gpu][multi-gpu]") {
    REQUIRE(take(cudyn::Device::count()) >= 2);  // the Meson test skips below two devices
    auto on_one = activate(1);
    auto on_gpu1 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    require_ok(on_gpu1.fill(7u));
    auto on_zero = activate(0);
    auto on_gpu0 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    require_ok(on_gpu0.fill(3u));
    auto back_on_gpu0 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    require_ok(back_on_gpu0.set_bytes(0));
    const std::size_t half = kWords / 2;
    cudyn::CopyPlan plan;
    require_ok(plan.add(take(on_gpu1.device_span().subspan(0, half)), take(on_gpu0.device_span().subspan(0, half))));
    require_ok(plan.add(take(back_on_gpu0.device_span().subspan(half, half)),
                        take(on_gpu1.device_span().subspan(half, half))));
    auto stream = take(cudyn::Stream::create());
    take(plan.execute(stream));
    require_ok(stream.synchronize());
    std::vector<std::uint32_t> gpu1(kWords);
    std::vector<std::uint32_t> gpu0(kWords);
    require_ok(on_gpu1.copy_to(gpu1));
    require_ok(back_on_gpu0.copy_to(gpu0));
    std::vector<std::uint32_t> expected1(kWords, 7u);
    std::fill(expected1.begin(), expected1.begin() + static_cast<std::ptrdiff_t>(half), 3u);
    std::vector<std::uint32_t> expected0(kWords, 0u);
    std::fill(expected0.begin() + static_cast<std::ptrdiff_t>(half), expected0.end(), 7u);
    CHECK(gpu1 == expected1);
    CHECK(gpu0 == expected0);
}

TEST_CASE("a GPU-0 GrowableBuffer granted to GPU 1 waits for kernels on both GPUs when destroyed",
          "[gpu][multi-gpu]") {
    REQUIRE(take(cudyn::Device::count()) >= 2);  // the Meson test skips below two devices
    if (!take(take(cudyn::Device::get(1)).can_access_peer(take(cudyn::Device::get(0))))) {
        std::printf("SKIP: GPU 1 cannot access GPU 0 (cuDeviceCanAccessPeer is 0)\n");
        std::exit(77);
    }
    auto on_one = activate(1);
    auto kernels1 = take(PtxKernels::load());
    auto stream1 = take(cudyn::Stream::create(false));
    auto on_zero = activate(0);
    auto kernels0 = take(PtxKernels::load());
    auto stream0 = take(cudyn::Stream::create(false));
    const std::size_t bytes = 64 * cudyn_test::kMiB;
    cudyn::GrowableBufferOptions options;
    options.access = {{Location::device(0), AccessFlags::ReadWrite}, {Location::device(1), AccessFlags::ReadWrite}};
    auto buffer = take(cudyn::GrowableBuffer::create(cudyn::AllocationProperties::device(0), bytes, options));
    require_ok(buffer.grow_to(bytes));
    const std::uint64_t half_words = bytes / 8;
    constexpr std::uint64_t kDelayNs = 200'000'000;  // 200 ms of each kernel still to run
    require_ok(kernels0.delayed_fill_u32(buffer.device_address(), half_words, 1u, kDelayNs, stream0.handle()));
    require_ok(on_one.make_current());
    require_ok(kernels1.delayed_fill_u32(buffer.device_address() + bytes / 2, half_words, 2u, kDelayNs,
                                         stream1.handle()));
    require_ok(on_zero.make_current());
    const auto start = std::chrono::steady_clock::now();
    buffer = cudyn::GrowableBuffer();  // destroyed from GPU 0's context
    const std::chrono::duration<double, std::milli> waited = std::chrono::steady_clock::now() - start;
    CHECK(waited.count() > 100.0);  // it waited for the kernels
    synchronize();                  // GPU 0 healthy
    require_ok(on_one.make_current());
    synchronize();                  // GPU 1 healthy
    require_ok(on_zero.make_current());
}
