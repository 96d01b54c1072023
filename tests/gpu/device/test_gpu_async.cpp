// gpu suite: asynchrony on the real driver.
//
//   [gpu][async]             synchronous cudyn calls return done: a kernel on a
//                            non-blocking stream launched right after reads
//                            everything they wrote
//   [gpu][teardown]          owners unmap and free under running work and the
//                            context stays healthy (the reproduction: grow a
//                            GrowableBuffer to 4 GiB, fill it, let it go)
//   [gpu][context-lifetime]  a buffer that outlives the program's context
//                            frees only its own memory; owners release from a
//                            thread with no context current
//
// "Healthy" is checked the way it failed before: the next cuCtxSynchronize
// answers CUDA_SUCCESS, not CUDA_ERROR_ILLEGAL_ADDRESS. The delayed_fill_u32
// kernel holds memory for a known time to race a release against.
#include "support/catch.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"

#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

using cudyn::AllocationProperties;
using cudyn::DeviceBuffer;
using cudyn::DriverTable;
using cudyn::GrowableBuffer;
using cudyn::Stream;
using cudyn::call_driver;
using cudyn_test::kMiB;
using cudyn_test::PtxKernels;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::uint64_t kKernelDelayNs = 200'000'000;  // the racing kernel writes 200 ms after it starts

cudyn::PrimaryContext activate() { return take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0)))); }

// The context still works: no fault is pending or sticky.
void require_healthy() {
    const auto synchronized = call_driver(&DriverTable::cuCtxSynchronize_v2000);
    INFO((synchronized.has_value() ? std::string() : synchronized.error().describe()));
    REQUIRE(synchronized.has_value());
}

// sum_u32 of `count` words at `data`, run on `stream`: what a kernel reads.
std::uint32_t kernel_sum(const PtxKernels& kernels, CUdeviceptr data, std::size_t count, const Stream& stream,
                         CUdeviceptr counter) {
    require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, counter, 0u, std::size_t{1}, stream.handle()));
    require_ok(kernels.sum_u32(data, count, counter, stream.handle()));
    require_ok(stream.synchronize());
    std::uint32_t sum = 0;
    require_ok(call_driver(&DriverTable::cuMemcpyDtoH_v3020, &sum, counter, sizeof sum));
    return sum;
}

// Skips (passes nothing) when the device has less free memory than a case needs.
bool have_free(std::size_t bytes) {
    auto info = take(cudyn::current_device_memory_info());
    return info.free_bytes > bytes + kGiB;
}

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("synchronous fills and copies are done when they return", "[gpu][async]") {
    auto context = activate();
    const auto kernels = take(PtxKernels::load());
    REQUIRE(have_free(2 * kGiB));
    const std::size_t words = kGiB / 4;
    auto buffer = take(DeviceBuffer<std::uint32_t>::allocate(2 * words));
    auto counter = take(DeviceBuffer<std::uint32_t>::allocate(1));
    const Stream reader = take(Stream::create(false));  // ordered after nothing implicitly
    const auto front = take(buffer.device_span().subspan(0, words));
    const auto back = take(buffer.device_span().subspan(words, words));

    // 1 GiB takes the device ~0.3 ms: a call that returned early would leave
    // the reader most of it unwritten.
    require_ok(front.fill(3u));
    CHECK(kernel_sum(kernels, front.device_address(), words, reader, counter.device_address()) == static_cast<std::uint32_t>(3u * words));
    require_ok(back.copy_from(front));
    CHECK(kernel_sum(kernels, back.device_address(), words, reader, counter.device_address()) == static_cast<std::uint32_t>(3u * words));
    require_ok(buffer.set_bytes(0x01));
    CHECK(kernel_sum(kernels, back.device_address(), words, reader, counter.device_address()) ==
          static_cast<std::uint32_t>(0x01010101u * words));
    const std::vector<std::uint32_t> host(words, 5u);
    require_ok(front.copy_from(host));  // pageable: the driver may return once staged
    CHECK(kernel_sum(kernels, front.device_address(), words, reader, counter.device_address()) == static_cast<std::uint32_t>(5u * words));
    require_healthy();
}

TEST_CASE("the reproduction: grow to 4 GiB, fill, let it go; the context stays healthy", "[gpu][teardown]") {
    auto context = activate();
    REQUIRE(have_free(4 * kGiB));
    {
        auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 8 * kGiB));
        require_ok(buffer.grow_to(4 * kGiB));
        require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(0xC0FFEEu));
    }
    require_healthy();
    {
        // The fill still running on a non-blocking stream when the buffer goes.
        const Stream stream = take(Stream::create(false));
        auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 8 * kGiB));
        require_ok(buffer.grow_to(4 * kGiB));
        require_ok(take(buffer.device_span_as<std::uint32_t>()).fill(0xC0FFEEu, stream));
    }
    require_healthy();
}

TEST_CASE("unmapping, releasing and freeing under a running kernel wait for it", "[gpu][teardown]") {
    auto context = activate();
    const auto kernels = take(PtxKernels::load());
    const Stream stream = take(Stream::create(false));
    auto counter = take(DeviceBuffer<std::uint32_t>::allocate(1));
    const std::size_t bytes = 64 * kMiB;
    const std::size_t words = bytes / 4;

    SECTION("GrowableBuffer destroyed") {
        {
            auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), bytes));
            require_ok(buffer.grow_to(bytes));
            require_ok(kernels.delayed_fill_u32(buffer.device_address(), words, 1u, kKernelDelayNs, stream.handle()));
            const auto start = std::chrono::steady_clock::now();
            buffer = GrowableBuffer();  // the old one is destroyed here
            CHECK(ms_since(start) > 100.0);  // it waited for the kernel
        }
        require_healthy();
    }
    SECTION("GrowableBuffer shrunk and released with its bytes saved") {
        auto buffer = take(GrowableBuffer::create(AllocationProperties::device(0), 2 * bytes));
        require_ok(buffer.grow_to(2 * bytes));
        require_ok(kernels.delayed_fill_u32(buffer.device_address() + bytes, words, 2u, kKernelDelayNs, stream.handle()));
        require_ok(buffer.shrink_to(bytes));
        require_healthy();
        require_ok(kernels.delayed_fill_u32(buffer.device_address(), words, 7u, kKernelDelayNs, stream.handle()));
        require_ok(buffer.release_physical(GrowableBuffer::Contents::Save));
        require_healthy();
        require_ok(buffer.restore());
        CHECK(kernel_sum(kernels, buffer.device_address(), words, stream, counter.device_address()) ==
              static_cast<std::uint32_t>(7u * words));
    }
    SECTION("DeviceBuffer freed (the driver's cuMemFree waits)") {
        auto buffer = take(DeviceBuffer<std::uint32_t>::allocate(words));
        require_ok(kernels.delayed_fill_u32(buffer.device_address(), words, 1u, kKernelDelayNs, stream.handle()));
        require_ok(buffer.free());
        require_healthy();
    }
    SECTION("PinnedBuffer freed under a copy out of it (cuMemFreeHost waits)") {
        auto device = take(DeviceBuffer<std::uint32_t>::allocate(words));
        require_ok(kernels.delayed_fill_u32(device.device_address(), 1, 0u, kKernelDelayNs, stream.handle()));
        {
            auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(words));
            for (std::uint32_t& word : pinned) word = 9u;
            require_ok(device.copy_from(pinned.span(), stream));  // queued behind the kernel
        }
        require_healthy();
        CHECK(kernel_sum(kernels, device.device_address(), words, stream, counter.device_address()) == static_cast<std::uint32_t>(9u * words));
    }
}

TEST_CASE("a buffer that outlives the program's context frees only its own memory", "[gpu][context-lifetime]") {
    auto context = activate();
    auto stale = take(DeviceBuffer<std::uint32_t>::allocate(1 << 20));
    require_ok(stale.fill(1u));
    const CUdeviceptr stale_address = stale.device_address();
    require_ok(context.release());  // the program's last reference; the buffer keeps its own
    auto again = activate();
    // The old context, and the buffer's memory with its bytes, are still there.
    std::vector<std::uint32_t> kept(1 << 20);
    require_ok(stale.copy_to(kept));
    CHECK(kept == std::vector<std::uint32_t>(1 << 20, 1u));
    auto fresh = take(DeviceBuffer<std::uint32_t>::allocate(1 << 20));
    require_ok(fresh.fill(2u));
    // The stale free releases its own allocation and nothing else, wherever
    // the allocator put the two: its address is no longer known to the
    // driver, the fresh buffer's bytes are intact.
    require_ok(stale.free());
    const cudyn::PointerAttributes stale_now = take(cudyn::pointer_attributes(stale_address));
    INFO("the freed address reads as " << cudyn::to_string(stale_now.memory_type));
    CHECK_FALSE(stale_now.known());
    std::vector<std::uint32_t> survived(1 << 20);
    require_ok(fresh.copy_to(survived));
    CHECK(survived == std::vector<std::uint32_t>(1 << 20, 2u));
    const std::vector<std::uint32_t> values(1 << 20, 42u);
    require_ok(fresh.copy_from(values));
    std::vector<std::uint32_t> back(1 << 20);
    require_ok(fresh.copy_to(back));
    CHECK(back == values);

    // Freed from a thread with no context current: into its own context.
    bool freed = false;
    std::thread bare([&] { freed = fresh.free().has_value(); });
    bare.join();
    CHECK(freed);
    require_healthy();
}
