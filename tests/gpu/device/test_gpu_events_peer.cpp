// gpu suite: owned events ([gpu][async]), the stream-context rule on one GPU
// ([gpu][context]: operations on an owned stream with no context current),
// the dma-buf trial after earlier small allocations ([gpu][fingerprint]), and
// on two GPUs ([gpu][multi-gpu]) peer access, P2P attributes, peer copies and
// a GPU-1 stream-ordered buffer used while GPU 0's context is current.
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/event.hpp"
#include "cudyn/device/peer_access.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/peer_copy.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

using cudyn::DriverTable;
using cudyn::Event;
using cudyn::EventOptions;
using cudyn::Stream;
using cudyn::call_driver;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

cudyn::PrimaryContext activate_gpu(int ordinal) {
    return take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(ordinal))));
}

CUcontext current_context() {
    CUcontext context = nullptr;
    require_ok(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &context));
    return context;
}

}  // namespace

TEST_CASE("gpu: an event times a fill and orders a second stream after it", "[gpu][async]") {
    auto context = activate_gpu(0);
    auto producer = take(Stream::create());
    auto consumer = take(Stream::create());
    auto start = take(Event::create());
    auto end = take(Event::create(EventOptions{true, true}));
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(std::size_t{64} << 20));  // 256 MiB
    require_ok(start.record(producer));
    for (int i = 0; i < 8; ++i) require_ok(buffer.fill(static_cast<std::uint32_t>(i + 1), producer));
    require_ok(end.record(producer));
    require_ok(end.wait(consumer));
    std::vector<std::uint32_t> out(16, 0);
    require_ok(buffer.device_span().subspan(buffer.size() - 16, 16).value().copy_to(
        cudyn::HostSpan<std::uint32_t>(out), consumer));
    require_ok(consumer.synchronize());
    CHECK(out[15] == 8u);  // the consumer read after the producer's last fill
    CHECK(take(end.query()));
    const float ms = take(Event::elapsed_ms(start, end));
    CHECK(ms > 0.0f);  // 2 GiB of writes take time on any GPU
    auto untimed = take(Event::create(EventOptions{false, false}));
    require_ok(untimed.record(producer));
    auto refused = Event::elapsed_ms(start, untimed);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == cudyn::ErrorCode::InvalidArgument);
}

TEST_CASE("gpu: operations on an owned stream work with no context current", "[gpu][context]") {
    auto context = activate_gpu(0);
    auto stream = take(Stream::create());
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(4096));
    auto event = take(Event::create());
    require_ok(call_driver(&DriverTable::cuCtxSetCurrent_v4000, static_cast<CUcontext>(nullptr)));
    require_ok(buffer.fill(77u, stream));
    std::vector<std::uint32_t> out(4096, 0);
    require_ok(buffer.device_span().copy_to(cudyn::HostSpan<std::uint32_t>(out), stream));
    require_ok(event.record(stream));
    require_ok(event.synchronize());
    CHECK(out[4095] == 77u);
    CHECK(current_context() == nullptr);  // the caller's (none) is back
    require_ok(context.make_current());
}

TEST_CASE("gpu: the dma-buf trial works after earlier small allocations where the device supports dma-buf",
          "[gpu][fingerprint]") {
    auto context = activate_gpu(0);
    auto device = take(cudyn::Device::get(0));
    const int supported = take(device.attribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED));
    // Small allocations first, as a program would have made: the next one
    // need not start on a page.
    std::vector<cudyn::DeviceBuffer<std::uint8_t>> earlier;
    for (int i = 0; i < 5; ++i) earlier.push_back(take(cudyn::DeviceBuffer<std::uint8_t>::allocate(4096)));
    auto fingerprint = take(cudyn::fingerprint_device(device));
    INFO("dma_buf: " << cudyn::to_string(fingerprint.dma_buf.outcome) << " " << fingerprint.dma_buf.detail);
    if (supported == 1) CHECK(fingerprint.dma_buf.outcome == cudyn::TrialOutcome::Works);
    else CHECK(fingerprint.dma_buf.outcome != cudyn::TrialOutcome::Works);
}

TEST_CASE("gpu: peer access, P2P attributes and peer copies between two GPUs", "[gpu][multi-gpu]") {
    REQUIRE(take(cudyn::Device::count()) >= 2);  // the Meson test skips below two devices
    auto d0 = take(cudyn::Device::get(0));
    auto d1 = take(cudyn::Device::get(1));
    auto context1 = activate_gpu(1);
    auto context0 = activate_gpu(0);
    const bool can = take(d0.can_access_peer(d1));
    const auto attributes = take(cudyn::peer_attributes(d0, d1));
    CHECK(attributes.access_supported == can);
    if (can) {
        require_ok(cudyn::enable_peer_access(context0, context1));
        require_ok(cudyn::enable_peer_access(context0, context1));  // idempotent
        CHECK(current_context() == context0.handle());
        require_ok(cudyn::disable_peer_access(context0, context1));
        require_ok(cudyn::disable_peer_access(context0, context1));  // idempotent
        require_ok(cudyn::enable_peer_access(context0, context1));
    } else {
        auto refused = cudyn::enable_peer_access(context0, context1);
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error().code == cudyn::ErrorCode::NotSupported);
    }
    // Peer copies work with or without access (the driver stages them).
    require_ok(context1.make_current());
    auto on1 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1 << 20));
    auto stream1 = take(Stream::create());
    require_ok(context0.make_current());
    auto on0 = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1 << 20));
    require_ok(on0.fill(0xC0FFEEu));
    require_ok(cudyn::copy_peer(on1.device_span(), context1, on0.device_span(), context0));
    std::vector<std::uint32_t> out(1 << 20, 0);
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[(1 << 20) - 1] == 0xC0FFEEu);
    require_ok(on0.fill(0xBEEFu));
    require_ok(cudyn::copy_peer(on1.device_span(), context1, on0.device_span(), context0, stream1));
    require_ok(stream1.synchronize());
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[0] == 0xBEEFu);

    // A copy plan across the devices: 256 pieces of 4 KiB from GPU 0 to GPU 1,
    // one batch on a GPU-0 stream (with unified addressing the batch takes
    // device pointers of either device), then the whole back the other way.
    auto stream0 = take(Stream::create());
    std::vector<std::uint32_t> pattern(1 << 20);
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::uint32_t>(i * 2654435761u);
    require_ok(on0.device_span().copy_from(cudyn::HostSpan<const std::uint32_t>(pattern)));
    require_ok(on1.fill(0u));
    constexpr std::size_t kPiece = 1024;  // words: 4 KiB
    cudyn::CopyPlan forward;
    for (std::size_t piece = 0; piece < 256; ++piece)
        require_ok(forward.add(take(on1.device_span().subspan(piece * kPiece, kPiece)),
                               take(on0.device_span().subspan(piece * kPiece, kPiece))));
    const auto path = take(forward.execute(stream0));
    INFO("path " << cudyn::to_string(path));
    require_ok(stream0.synchronize());
    require_ok(on1.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(std::equal(out.begin(), out.begin() + 256 * kPiece, pattern.begin()));
    CHECK(out[256 * kPiece] == 0u);  // past the pieces: untouched
    require_ok(on0.fill(0u));
    cudyn::CopyPlan back;
    require_ok(back.add(on0.device_span(), on1.device_span()));
    (void)take(back.execute(stream1));
    require_ok(stream1.synchronize());
    std::vector<std::uint32_t> returned(1 << 20, 1u);
    require_ok(on0.copy_to(cudyn::HostSpan<std::uint32_t>(returned)));
    CHECK(returned == out);
    if (can) require_ok(cudyn::disable_peer_access(context0, context1));
}

TEST_CASE("gpu: a GPU-1 stream-ordered buffer and event used while GPU 0's context is current", "[gpu][multi-gpu]") {
    REQUIRE(take(cudyn::Device::count()) >= 2);
    REQUIRE(take(take(cudyn::Device::get(1)).attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)) == 1);
    auto context1 = activate_gpu(1);
    auto stream1 = take(Stream::create());
    auto event1 = take(Event::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(1 << 16, stream1));
    auto context0 = activate_gpu(0);
    // The defect: the no-stream copy_to ran on the buffer's stream in GPU 0's
    // context and the driver answered cuMemcpyDtoHAsync_v2: INVALID_VALUE.
    std::vector<std::uint32_t> in(1 << 16, 3u), out(1 << 16, 0u);
    require_ok(buffer.copy_from(cudyn::HostSpan<const std::uint32_t>(in)));
    require_ok(buffer.copy_to(cudyn::HostSpan<std::uint32_t>(out)));
    CHECK(out[(1 << 16) - 1] == 3u);
    require_ok(buffer.fill(4u, stream1));
    require_ok(event1.record(stream1));
    auto stream0 = take(Stream::create());
    require_ok(event1.wait(stream0));  // GPU 0's stream waits for GPU 1's record
    require_ok(stream0.synchronize());
    CHECK(take(event1.query()));
    CHECK(current_context() == context0.handle());
    require_ok(buffer.free());
    require_ok(stream1.synchronize());
}
