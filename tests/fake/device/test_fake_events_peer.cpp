// Events, peer access and the stream-context rule against the emulated fake:
// owned events record, wait, query, synchronize and time in stream order;
// peer access is enabled and disabled per context pair (idempotent, refused
// with the reason); operations on a device-1 stream work while device 0's
// context is current; the dma-buf trial does not depend on where the
// process's earlier allocations left off.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/event.hpp"
#include "cudyn/device/peer_access.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/device/topology.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/memory/peer_copy.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using cudyn::DriverTable;
using cudyn::ErrorCode;
using cudyn::Event;
using cudyn::EventOptions;
using cudyn::Stream;
using cudyn::call_driver;
using namespace cudyn_test;

namespace {

void set_peer(int accessor, int owner, bool can) {
    auto function =
        reinterpret_cast<PFN_fakecuda_set_peer_access>(FakeDriver::loaded().symbol("fakecuda_set_peer_access"));
    REQUIRE(function != nullptr);
    function(accessor, owner, can ? 1 : 0);
}

CUcontext current_context() {
    CUcontext context = nullptr;
    REQUIRE(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &context).has_value());
    return context;
}

}  // namespace

TEST_CASE("an event completes in stream order and times the work between two records", "[emulated][async]") {
    auto context = activate(0);
    const ScopedStreamDelay delay(20000);  // 20 ms per piece of work
    auto stream = take(Stream::create());
    auto start = take(Event::create());
    auto end = take(Event::create(EventOptions{true, true}));
    CHECK(take(start.query()));  // never recorded: complete
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
    require_ok(start.record(stream));
    require_ok(buffer.fill(7u, stream));
    require_ok(end.record(stream));
    CHECK_FALSE(take(end.query()));  // the fill is still ahead of it
    // While pending, the driver's NOT_READY comes back as is.
    auto early = Event::elapsed_ms(start, end);
    REQUIRE_FALSE(early.has_value());
    CHECK(early.error().driver_result == CUDA_ERROR_NOT_READY);
    require_ok(end.synchronize());
    CHECK(take(end.query()));
    const float ms = take(Event::elapsed_ms(start, end));
    CHECK(ms >= 15.0f);  // the fill and the end marker each waited the delay
    CHECK(ms < 5000.0f);
    CHECK(take(Event::elapsed_ms(end, end)) == 0.0f);
}

TEST_CASE("an event orders one stream after another's work", "[emulated][async]") {
    auto context = activate(0);
    const ScopedStreamDelay delay(20000);
    auto producer = take(Stream::create());
    auto consumer = take(Stream::create());
    auto ready = take(Event::create(EventOptions{false, false}));
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(256));
    require_ok(buffer.fill(1u));
    require_ok(buffer.fill(42u, producer));
    require_ok(ready.record(producer));
    require_ok(ready.wait(consumer));
    std::vector<std::uint32_t> out(256, 0);
    require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(out), consumer));
    require_ok(consumer.synchronize());
    CHECK(out[0] == 42u);
    CHECK(out[255] == 42u);
}

TEST_CASE("events refuse bad input before the driver", "[emulated][async]") {
    auto context = activate(0);
    auto timed = take(Event::create());
    auto untimed = take(Event::create(EventOptions{false, false}));
    const DriverSnapshot before({"cuEventElapsedTime", "cuEventRecord"});
    require_error(Event::elapsed_ms(timed, untimed), ErrorCode::InvalidArgument, "end event was created without timing");
    require_error(Event::elapsed_ms(untimed, timed), ErrorCode::InvalidArgument, "start event was created without timing");
    Event empty;
    require_error(empty.record(Stream::legacy_default()), ErrorCode::InvalidArgument, "empty");
    require_error(empty.query(), ErrorCode::InvalidArgument, "empty");
    require_error(Event::elapsed_ms(empty, timed), ErrorCode::InvalidArgument, "start event is empty");
    before.require_untouched();
    // Never recorded: the driver's answer.
    auto never = Event::elapsed_ms(timed, timed);
    REQUIRE_FALSE(never.has_value());
    CHECK(never.error().driver_result == CUDA_ERROR_INVALID_HANDLE);
    require_ok(timed.destroy());
    CHECK(timed.empty());
    require_ok(timed.destroy());  // already empty: success
}

TEST_CASE("an event keeps its context: recorded, waited on and destroyed with another context current",
          "[emulated][multi-device]") {
    auto context1 = activate(1);
    auto stream1 = take(Stream::create());
    auto event1 = take(Event::create());
    auto context0 = activate(0);
    REQUIRE(current_context() == context0.handle());
    require_ok(event1.record(stream1));
    require_ok(event1.record(Stream::legacy_default()));  // device 1's legacy stream: the event's context
    auto stream0 = take(Stream::create());
    require_ok(event1.wait(stream0));  // a device-0 stream waits for device 1's record
    require_ok(event1.synchronize());
    // An event of device 1 on a device-0 stream: the driver would refuse it.
    require_error(event1.record(stream0), ErrorCode::InvalidArgument, "another context");
    const long live = FakeDriver::loaded().live_events();
    context1 = cudyn::PrimaryContext{std::move(context0)};  // the program lets go of device 1's context
    require_ok(event1.destroy());
    CHECK(FakeDriver::loaded().live_events() == live - 1);
    CHECK(current_context() == context1.handle());  // the caller's context is back
}

TEST_CASE("peer access: enabled and disabled per pair, idempotent, refused with the reason",
          "[emulated][cuda11][multi-device]") {
    auto context1 = activate(1);
    auto context0 = activate(0);
    require_ok(cudyn::enable_peer_access(context0, context1));
    require_ok(cudyn::enable_peer_access(context0, context1));  // already enabled: success
    CHECK(current_context() == context0.handle());
    require_ok(cudyn::enable_peer_access(context1, context0));
    CHECK(current_context() == context0.handle());  // put back after making device 1's current
    require_ok(cudyn::disable_peer_access(context0, context1));
    require_ok(cudyn::disable_peer_access(context0, context1));  // not enabled: success
    require_ok(cudyn::disable_peer_access(context1, context0));
    require_error(cudyn::enable_peer_access(context0, context0), ErrorCode::InvalidArgument, "both contexts are on device 0");
    set_peer(0, 1, false);
    {
        // The driver refuses the pair; cudyn says why, from cuDeviceCanAccessPeer.
        require_error(cudyn::enable_peer_access(context0, context1), ErrorCode::NotSupported,
                      "cuDeviceCanAccessPeer says the first cannot reach the second's memory directly");
        // The other direction is its own pair.
        require_ok(cudyn::enable_peer_access(context1, context0));
        require_ok(cudyn::disable_peer_access(context1, context0));
    }
    set_peer(0, 1, true);
    {
        // The driver's peer limit: its answer, with the likely cause.
        ScopedFault fault("cuCtxEnablePeerAccess:1:CUDA_ERROR_TOO_MANY_PEERS");
        auto refused = cudyn::enable_peer_access(context0, context1);
        require_error(refused, ErrorCode::Driver, "as many peer mappings as the driver allows");
        CHECK(refused.error().driver_result == CUDA_ERROR_TOO_MANY_PEERS);
    }
}

TEST_CASE("P2P attributes follow the per-pair peer path", "[emulated][cuda11][multi-device]") {
    auto context = activate(0);
    auto d0 = take(cudyn::Device::get(0));
    auto d1 = take(cudyn::Device::get(1));
    auto on = take(cudyn::peer_attributes(d0, d1));
    CHECK(on.access_supported);
    CHECK(on.native_atomic_supported);
    set_peer(0, 1, false);
    auto off = take(cudyn::peer_attributes(d0, d1));
    CHECK_FALSE(off.access_supported);
    CHECK_FALSE(off.native_atomic_supported);
    CHECK(take(cudyn::peer_attributes(d1, d0)).access_supported);  // per direction
    set_peer(0, 1, true);
    require_error(cudyn::peer_attributes(d0, d0), ErrorCode::InvalidArgument, "both are device 0");
}

TEST_CASE("the topology holds every ordered pair, from the driver's answers", "[emulated][cuda11][legacy][multi-device]") {
    const bool has_atomic_capabilities = FakeDriver::loaded().variant() == "emulated";  // a 13.0 entry
    auto all = take(cudyn::probe_topology());
    REQUIRE(all.device_count == 2);
    REQUIRE(all.links.size() == 2);
    CHECK(all.all_pairs_peer_access());
    const cudyn::PeerLink* forward = all.link(0, 1);
    const cudyn::PeerLink* back = all.link(1, 0);
    REQUIRE(forward != nullptr);
    REQUIRE(back != nullptr);
    CHECK((forward->from == 0 && forward->to == 1 && back->from == 1 && back->to == 0));
    CHECK(forward->can_access_peer);
    CHECK(forward->attributes.native_atomic_supported);
    CHECK(all.link(0, 0) == nullptr);
    CHECK(all.link(0, 2) == nullptr);
    CHECK(all.link(-1, 0) == nullptr);
    if (has_atomic_capabilities) {
        REQUIRE(forward->atomic_capabilities.size() == CU_ATOMIC_OPERATION_MAX);
        CHECK((forward->atomic_capabilities[CU_ATOMIC_OPERATION_CAS] & CU_ATOMIC_CAPABILITY_SCALAR_64) != 0);
    } else {
        CHECK(forward->atomic_capabilities.empty());
    }

    set_peer(0, 1, false);
    auto cut = cudyn::probe_topology();
    set_peer(0, 1, true);
    REQUIRE(cut.has_value());
    CHECK_FALSE(cut->all_pairs_peer_access());
    CHECK_FALSE(cut->link(0, 1)->can_access_peer);
    CHECK(cut->link(1, 0)->can_access_peer);  // per direction
    if (has_atomic_capabilities) CHECK(cut->link(0, 1)->atomic_capabilities[CU_ATOMIC_OPERATION_CAS] == 0u);

    // A failed query fails the probe, naming the pair.
    ScopedFault fault("cuDeviceCanAccessPeer:2:CUDA_ERROR_UNKNOWN");
    auto failed = cudyn::probe_topology();
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().driver_result == CUDA_ERROR_UNKNOWN);
    CHECK(failed.error().message.find("probe_topology: device 1 -> device 0") != std::string::npos);
}

TEST_CASE("peer copies move bytes between the devices, synchronous and on a stream",
          "[emulated][cuda11][multi-device]") {
    auto context1 = activate(1);
    auto on1 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(4096));
    auto stream1 = take(Stream::create());
    auto context0 = activate(0);
    auto on0 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(4096));
    require_ok(on0.fill(0xABCDu));
    require_ok(cudyn::copy_peer(on1.device_span(), context1, on0.device_span(), context0));
    std::vector<std::uint32_t> out(4096, 0);
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[4095] == 0xABCDu);
    require_ok(on0.fill(0x1234u));
    require_ok(cudyn::copy_peer(on1.device_span(), context1, on0.device_span(), context0, stream1));
    require_ok(stream1.synchronize());
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[0] == 0x1234u);
    auto small = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(16));
    require_error(cudyn::copy_peer(small.device_span(), context0, on1.device_span(), context1), ErrorCode::InvalidArgument,
                  "does not fit");

    // A copy plan across the devices, on a device-0 stream: 4 pieces of 1 KiB to device 1.
    auto stream0 = take(Stream::create());
    std::vector<std::uint32_t> pattern(4096);
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::uint32_t>(i * 7u + 1u);
    require_ok(on0.device_span().copy_from(cudyn::HostSpan<const std::uint32_t>(pattern)));
    require_ok(on1.fill(0u));
    cudyn::CopyPlan plan;
    for (std::size_t piece = 0; piece < 4; ++piece)
        require_ok(plan.add(take(on1.device_span().subspan(piece * 256, 256)),
                            take(on0.device_span().subspan(piece * 256, 256))));
    (void)take(plan.execute(stream0));
    require_ok(stream0.synchronize());
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(std::equal(out.begin(), out.begin() + 1024, pattern.begin()));
    CHECK(out[1024] == 0u);
}

TEST_CASE("a context switch that cannot be undone is an error: copy_peer and device_memory_info say so",
          "[emulated][cuda11][multi-device]") {
    auto context1 = activate(1);
    auto on1 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(4096));
    auto context0 = activate(0);
    auto on0 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(4096));
    require_ok(on0.fill(0xABCDu));
    const auto current = [] {
        CUcontext now = nullptr;
        require_ok(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &now));
        return now;
    };
    {
        // The caller is on device 0; the copy switches to device 1's context
        // (cuCtxSetCurrent 1), and putting device 0's back (2) fails.
        const ScopedFault fault("cuCtxSetCurrent:2:CUDA_ERROR_INVALID_CONTEXT");
        require_error(cudyn::copy_peer(on1.device_span(), context1, on0.device_span(), context0), ErrorCode::Driver,
                      "copy_peer: the caller's context could not be put back");
    }
    // Said, not hidden: device 1's context is what is current now, and the copy itself was done.
    CHECK(current() == context1.handle());
    require_ok(context0.make_current());
    std::vector<std::uint32_t> out(4096, 0);
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[4095] == 0xABCDu);
    {
        const ScopedFault fault("cuCtxSetCurrent:2:CUDA_ERROR_INVALID_CONTEXT");
        require_error(cudyn::device_memory_info(context1), ErrorCode::Driver,
                      "device_memory_info: the caller's context could not be put back");
    }
    CHECK(current() == context1.handle());
    require_ok(context0.make_current());
    // Without the fault both put the caller's context back.
    require_ok(cudyn::copy_peer(on1.device_span(), context1, on0.device_span(), context0));
    CHECK(current() == context0.handle());
    CHECK(take(cudyn::device_memory_info(context1)).device == 1);
    CHECK(current() == context0.handle());
}

TEST_CASE("a device-1 stream works while device 0's context is current", "[emulated][cuda11][multi-device]") {
    auto context1 = activate(1);
    auto stream1 = take(Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(1024, stream1));
    auto device_buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
    auto context0 = activate(0);
    REQUIRE(current_context() == context0.handle());
    // The stream-ordered buffer's no-stream forms run on its stream, in its context.
    std::vector<std::uint32_t> in(1024, 5u), out(1024, 0u);
    require_ok(buffer.copy_from(cudyn::HostSpan<const std::uint32_t>(in)));
    require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[1023] == 5u);
    // Every operation given the stream makes its context current for the call.
    require_ok(device_buffer.fill(9u, stream1));
    require_ok(device_buffer.device_span().copy_to(cudyn::HostSpan<std::uint32_t>(out), stream1));
    require_ok(stream1.synchronize());
    CHECK(out[0] == 9u);
    auto second = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(64, stream1));
    require_ok(second.free());
    CHECK(current_context() == context0.handle());
    // A refused call still puts the caller's context back.
    FakeDriver::loaded().set_fail("cuMemcpyDtoHAsync:1");
    auto refused = device_buffer.device_span().copy_to(cudyn::HostSpan<std::uint32_t>(out), stream1);
    FakeDriver::loaded().set_fail("");
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().driver_result == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(current_context() == context0.handle());
    // A stream of the current context costs one cuCtxGetCurrent and no switch.
    {
        auto stream0 = take(Stream::create());
        const DriverSnapshot before({"cuCtxGetCurrent", "cuCtxSetCurrent"});
        require_ok(device_buffer.fill(1u, stream0));  // device-1 memory, written from device 0's stream
        CHECK(before.calls_since("cuCtxGetCurrent") == 1);
        CHECK(before.calls_since("cuCtxSetCurrent") == 0);
        require_ok(stream0.synchronize());
    }
    // Raw, without the stream's context: device 1's pool memory (its pool
    // grants device 0 nothing) cannot be copied, cuMemAlloc memory can (what
    // driver 580 answered and the fake models).
    std::uint32_t word = 0;
    auto raw_pool = call_driver(&DriverTable::cuMemcpyDtoHAsync_v3020, static_cast<void*>(&word),
                                buffer.device_address(), sizeof word, stream1.handle());
    REQUIRE_FALSE(raw_pool.has_value());
    CHECK(raw_pool.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    require_ok(call_driver(&DriverTable::cuMemcpyDtoHAsync_v3020, static_cast<void*>(&word),
                           device_buffer.device_address(), sizeof word, stream1.handle()));
    require_ok(stream1.synchronize());
    CHECK(word == 1u);
    require_ok(buffer.free());
}

TEST_CASE("the dma-buf trial's verdict does not depend on earlier allocations", "[emulated][fingerprint]") {
    auto set_offset = reinterpret_cast<PFN_fakecuda_set_small_alloc_offset>(
        FakeDriver::loaded().symbol("fakecuda_set_small_alloc_offset"));
    REQUIRE(set_offset != nullptr);
    auto context = activate(0);
    auto device = take(cudyn::Device::get(0));
    set_offset(512);  // as driver 580 placed a fresh 4 KiB allocation after earlier ones
    auto earlier = take(cudyn::DeviceBuffer<std::uint8_t>::allocate(4096));
    CHECK(earlier.device_address() % 4096 == 512);  // the model holds
    auto fingerprint = cudyn::fingerprint_device(device);
    set_offset(0);
    REQUIRE(fingerprint.has_value());
    INFO(fingerprint->dma_buf.detail);
    CHECK(fingerprint->dma_buf.outcome == cudyn::TrialOutcome::Works);
}
