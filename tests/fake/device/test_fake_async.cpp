// Stream semantics on the emulated fake ([async]): work enqueued on a stream
// runs later, in stream order; the no-stream entries return when the real
// driver returns them (memsets and device-to-device copies at once, copies to
// the host when done); the legacy stream waits for blocking streams and not
// for non-blocking ones; events complete with the work before them. Then what
// cudyn builds on it: every synchronous cudyn call returns only once the
// device has done it, and is ordered before work enqueued after it on any
// stream.
//
// The fake's memory is host memory at the device address, so `peek` reads
// what the device has written so far without going through a stream.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using cudyn::DriverTable;
using cudyn::Stream;
using cudyn::call_driver;
using namespace cudyn_test;  // FakeDriver, ScopedStreamDelay, activate, take, require_ok

namespace {

constexpr unsigned kSlow = 100'000;  // us each piece of work waits: far longer than a call takes
constexpr std::size_t kWords = 1024;

// The word at a device address as the emulated device left it (not through a stream).
std::uint32_t peek(CUdeviceptr address) { return *reinterpret_cast<volatile const std::uint32_t*>(address); }

bool all_words(CUdeviceptr address, std::size_t count, std::uint32_t value) {
    for (std::size_t i = 0; i < count; ++i)
        if (peek(address + 4 * i) != value) return false;
    return true;
}

CUresult stream_query(CUstream stream) {
    return cudyn::driver().cuStreamQuery_v2000(stream);
}

Stream make_stream(bool blocking) {
    auto stream = Stream::create(blocking);
    REQUIRE(stream.has_value());
    return std::move(*stream);
}

}  // namespace

TEST_CASE("the fake runs stream work later, in order; queries say NOT_READY meanwhile", "[emulated][async]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE(buffer.has_value());
    require_ok(buffer->fill(1u));
    const Stream stream = make_stream(false);
    {
        const ScopedStreamDelay slow(kSlow);
        require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer->device_address(), 7u, kWords, stream.handle()));
        // The copy runs after the set: it sees 7s.
        require_ok(call_driver(&DriverTable::cuMemcpyDtoDAsync_v3020, buffer->device_address() + 2048, buffer->device_address(),
                               std::size_t{2048}, stream.handle()));
        CUevent event = nullptr;
        require_ok(call_driver(&DriverTable::cuEventCreate_v2000, &event, 0u));
        require_ok(call_driver(&DriverTable::cuEventRecord_v2000, event, stream.handle()));
        CHECK(peek(buffer->device_address()) == 1u);  // nothing ran yet
        CHECK(stream_query(stream.handle()) == CUDA_ERROR_NOT_READY);
        CHECK(cudyn::driver().cuEventQuery_v2000(event) == CUDA_ERROR_NOT_READY);
        CHECK(take(stream.query()) == false);
        CHECK(FakeDriver::loaded().pending_work() >= 3);
        require_ok(call_driver(&DriverTable::cuEventSynchronize_v2000, event));
        CHECK(cudyn::driver().cuEventQuery_v2000(event) == CUDA_SUCCESS);
        CHECK(stream_query(stream.handle()) == CUDA_SUCCESS);
        CHECK(all_words(buffer->device_address(), kWords, 7u));
        require_ok(call_driver(&DriverTable::cuEventDestroy_v4000, event));
    }
    CHECK(take(stream.query()) == true);
}

TEST_CASE("no-stream entries return when the real driver returns them", "[emulated][async]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    auto pinned = cudyn::PinnedBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE((buffer.has_value() && pinned.has_value()));
    require_ok(buffer->fill(1u));
    const ScopedStreamDelay slow(kSlow);

    // A memset of device memory and a device-to-device copy return at once.
    require_ok(call_driver(&DriverTable::cuMemsetD32_v3020, buffer->device_address(), 5u, kWords / 2));
    CHECK(peek(buffer->device_address()) == 1u);
    CHECK(stream_query(CU_STREAM_LEGACY) == CUDA_ERROR_NOT_READY);
    require_ok(call_driver(&DriverTable::cuMemcpyDtoD_v3020, buffer->device_address() + 2048, buffer->device_address(), std::size_t{2048}));
    CHECK(peek(buffer->device_address() + 2048) == 1u);
    // A copy to the host returns done, after the work before it on the stream.
    std::vector<std::uint32_t> host(kWords);
    require_ok(call_driver(&DriverTable::cuMemcpyDtoH_v3020, host.data(), buffer->device_address(), kWords * 4));
    CHECK(host == std::vector<std::uint32_t>(kWords, 5u));

    // From pageable memory: returns once the source is taken (the device
    // write may be pending); the caller may reuse its buffer at once.
    std::vector<std::uint32_t> source(kWords, 8u);
    require_ok(call_driver(&DriverTable::cuMemcpyHtoD_v3020, buffer->device_address(), source.data(), kWords * 4));
    source.assign(kWords, 9u);
    require_ok(call_driver(&DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY));
    CHECK(all_words(buffer->device_address(), kWords, 8u));

    // From pinned memory, and a memset of pinned or managed memory: when done.
    for (std::size_t i = 0; i < kWords; ++i) (*pinned)[i] = 3u;
    require_ok(call_driver(&DriverTable::cuMemcpyHtoD_v3020, buffer->device_address(), pinned->data(), kWords * 4));
    CHECK(peek(buffer->device_address()) == 3u);
    auto managed = cudyn::ManagedBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE(managed.has_value());
    require_ok(call_driver(&DriverTable::cuMemsetD32_v3020, managed->device_address(), 4u, kWords));
    CHECK((*managed)[kWords - 1] == 4u);
}

TEST_CASE("the legacy stream waits for blocking streams, not for non-blocking ones", "[emulated][async]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE(buffer.has_value());
    require_ok(buffer->fill(0u));
    const Stream blocking = make_stream(true);
    const Stream non_blocking = make_stream(false);
    {
        const ScopedStreamDelay slow(kSlow);
        require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer->device_address(), 1u, kWords, blocking.handle()));
        // Enqueued after the blocking stream's set, the legacy one runs after it.
        require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer->device_address(), 2u, kWords, CU_STREAM_LEGACY));
        require_ok(call_driver(&DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY));
        CHECK(stream_query(blocking.handle()) == CUDA_SUCCESS);
        CHECK(all_words(buffer->device_address(), kWords, 2u));
    }
    {
        const ScopedStreamDelay slow(kSlow * 3);
        require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer->device_address(), 3u, kWords, non_blocking.handle()));
        // Nothing on the legacy stream waits for it.
        const auto start = std::chrono::steady_clock::now();
        require_ok(call_driver(&DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY));
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::microseconds(kSlow * 3));
        CHECK(stream_query(non_blocking.handle()) == CUDA_ERROR_NOT_READY);
        require_ok(non_blocking.synchronize());
        CHECK(all_words(buffer->device_address(), kWords, 3u));
    }
}

TEST_CASE("an event orders a second stream after the first; the per-thread stream is its own", "[emulated][async]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(2 * kWords);
    REQUIRE(buffer.has_value());
    require_ok(buffer->fill(0u));
    const Stream first = make_stream(false);
    const Stream second = make_stream(false);
    const ScopedStreamDelay slow(kSlow);
    CUevent event = nullptr;
    require_ok(call_driver(&DriverTable::cuEventCreate_v2000, &event, unsigned{CU_EVENT_DISABLE_TIMING}));
    require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer->device_address(), 6u, kWords, first.handle()));
    require_ok(call_driver(&DriverTable::cuEventRecord_v2000, event, first.handle()));
    require_ok(call_driver(&DriverTable::cuStreamWaitEvent_v3020, second.handle(), event, 0u));
    require_ok(call_driver(&DriverTable::cuMemcpyDtoDAsync_v3020, buffer->device_address() + kWords * 4, buffer->device_address(),
                           kWords * 4, second.handle()));
    require_ok(second.synchronize());
    CHECK(all_words(buffer->device_address() + kWords * 4, kWords, 6u));
    require_ok(call_driver(&DriverTable::cuEventDestroy_v4000, event));

    // Work on this thread's per-thread default stream: pending until synchronized.
    require_ok(call_driver(&DriverTable::cuMemsetD32Async_v3020, buffer->device_address(), 8u, kWords, CU_STREAM_PER_THREAD));
    CHECK(stream_query(CU_STREAM_PER_THREAD) == CUDA_ERROR_NOT_READY);
    require_ok(call_driver(&DriverTable::cuStreamSynchronize_v2000, CU_STREAM_PER_THREAD));
    CHECK(all_words(buffer->device_address(), kWords, 8u));
}

TEST_CASE("cudyn's synchronous copies, fills and prefetches return done", "[emulated][async]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    auto other = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    auto mapped = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE((buffer.has_value() && other.has_value() && mapped.has_value()));
    const ScopedStreamDelay slow(kSlow);
    const auto span = buffer->device_span();

    require_ok(span.fill(0xF1F1F1F1u));
    CHECK(all_words(span.device_address(), kWords, 0xF1F1F1F1u));
    require_ok(buffer->set_bytes(0x22));
    CHECK(all_words(span.device_address(), kWords, 0x22222222u));
    require_ok(buffer->fill(0x33u));
    CHECK(all_words(span.device_address(), kWords, 0x33u));
    const std::vector<std::uint32_t> values = iota_vector(kWords, 100);
    require_ok(span.copy_from(values));  // from pageable memory: the driver returns once staged
    CHECK(peek(span.device_address() + 4 * (kWords - 1)) == 100 + kWords - 1);
    require_ok(other->copy_from(*buffer));
    CHECK(peek(other->device_address() + 4 * 17) == 117u);
    require_ok(other->device_span().subspan(0, 8)->copy_from(mapped->device_span().subspan(0, 8).value()));
    require_ok(mapped->device_span().fill(0x44u));
    CHECK((*mapped)[kWords - 1] == 0x44u);
    CHECK(FakeDriver::loaded().pending_work() == 0);

    // Ordered before work enqueued next on a non-blocking stream: it reads the fill.
    const Stream stream = make_stream(false);
    require_ok(span.fill(0x55u));
    std::vector<std::uint32_t> back(kWords);
    require_ok(span.copy_to(back, stream));
    require_ok(stream.synchronize());
    CHECK(back == std::vector<std::uint32_t>(kWords, 0x55u));

    // Prefetch without a stream: done when it returns.
    auto managed = cudyn::ManagedBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE(managed.has_value());
    auto hints = managed->managed_range();
    REQUIRE(hints.has_value());
    require_ok(hints->prefetch_to(cudyn::Location::device(0)));
    CHECK(FakeDriver::loaded().pending_work() == 0);
    require_ok(hints->prefetch_range(0, 4096, cudyn::Location::host()));
    CHECK(FakeDriver::loaded().pending_work() == 0);
    cudyn::PrefetchPlan plan;
    require_ok(plan.add(*hints, cudyn::Location::device(1)));
    require_ok(plan.execute());
    CHECK(FakeDriver::loaded().pending_work() == 0);
}

TEST_CASE("the asynchronous forms return before the work is done", "[emulated][async]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    REQUIRE(buffer.has_value());
    require_ok(buffer->fill(0u));
    const Stream stream = make_stream(false);
    const ScopedStreamDelay slow(kSlow);
    require_ok(buffer->fill(9u, stream));
    CHECK(peek(buffer->device_address()) == 0u);
    CHECK(take(stream.query()) == false);
    require_ok(stream.synchronize());
    CHECK(all_words(buffer->device_address(), kWords, 9u));
}
