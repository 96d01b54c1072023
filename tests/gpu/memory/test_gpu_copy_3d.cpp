// gpu suite: pitched memory, 2D and 3D copies and sets, 3D copies in a
// CopyPlan through every path ([gpu][copy-3d]), and discards in a
// PrefetchPlan ([gpu][discard]) on the real driver: the bytes of every
// direction (host pageable and pinned, device tight and pitched), the
// padding left alone, and memory that is usable again after a discard.
// Skips (exit 77) where no device is present: see tests/support/test_main.cpp.
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/pitched_buffer.hpp"
#include "cudyn/memory/prefetch_plan.hpp"

#include <cstdint>
#include <vector>

using cudyn::CopyPlan;
using cudyn::Extent3D;
using cudyn::PitchedBuffer;
using cudyn::PitchedSpan;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

cudyn::PrimaryContext activate_device0() {
    auto device = take(cudyn::Device::get(0));
    return take(cudyn::PrimaryContext::activate(device));
}

constexpr std::size_t kWidth = 300, kHeight = 7, kDepth = 5;
constexpr std::size_t kBytes = kWidth * kHeight * kDepth;

void fill_pattern(unsigned char* bytes, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 13 + seed);
}

std::vector<unsigned char> read_all(CUdeviceptr address, std::size_t bytes) {
    std::vector<unsigned char> out(bytes);
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, out.data(), address, bytes).has_value());
    return out;
}

// Every byte of a pitched buffer, padding included, set raw.
void set_all(const PitchedBuffer& buffer, unsigned char value) {
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD8_v3020, buffer.device_address(), value,
                               buffer.size_bytes())
                .has_value());
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000).has_value());
}

// The buffer holds `expected` (tight) in its rows and `padding` past them.
void check_pitched(const PitchedBuffer& buffer, const unsigned char* expected, unsigned char padding) {
    const auto stored = read_all(buffer.device_address(), buffer.size_bytes());
    for (std::size_t row = 0; row < buffer.height() * buffer.depth(); ++row)
        for (std::size_t x = 0; x < buffer.pitch(); ++x) {
            const unsigned char want = x < buffer.width_bytes() ? expected[row * buffer.width_bytes() + x] : padding;
            REQUIRE(stored[row * buffer.pitch() + x] == want);
        }
}

}  // namespace

TEST_CASE("gpu: copy_3d and copy_2d move the bytes of every direction, the padding untouched", "[gpu][copy-3d]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    auto volume = take(PitchedBuffer::allocate(kWidth, kHeight, kDepth));
    auto other = take(PitchedBuffer::allocate(kWidth, kHeight, kDepth));
    CHECK(volume.pitch() >= kWidth);
    std::vector<unsigned char> pageable(kBytes);
    fill_pattern(pageable.data(), kBytes, 1);
    auto pinned = take(cudyn::PinnedBuffer<unsigned char>::allocate(kBytes));
    fill_pattern(pinned.data(), kBytes, 2);
    const Extent3D all{kWidth, kHeight, kDepth};
    const auto tight = [](void* data) { return take(PitchedSpan::host(data, kWidth, kWidth, kHeight, kDepth)); };

    for (const bool on_stream : {false, true}) {
        INFO("on a stream: " << on_stream);
        const auto run = [&](const cudyn::PitchedCopy& copy) {
            if (on_stream) {
                require_ok(cudyn::copy_3d(copy, stream));
                require_ok(stream.synchronize());
            } else {
                require_ok(cudyn::copy_3d(copy));
            }
        };
        // Pageable host -> pitched device; device -> pageable host.
        set_all(volume, 0xEE);
        run({volume.span(), {}, tight(pageable.data()), {}, all});
        check_pitched(volume, pageable.data(), 0xEE);
        std::vector<unsigned char> back(kBytes, 0);
        run({tight(back.data()), {}, volume.span(), {}, all});
        CHECK(back == pageable);
        // Pinned host -> device; device -> device (pitched to pitched).
        run({volume.span(), {}, tight(pinned.data()), {}, all});
        set_all(other, 0x33);
        run({other.span(), {}, volume.span(), {}, all});
        check_pitched(other, pinned.data(), 0x33);
        // Device pitched -> tight device memory, a box with offsets.
        auto flat = take(cudyn::DeviceBuffer<unsigned char>::allocate(16 * 3 * 2));
        const auto flat_span = take(PitchedSpan::device(flat.device_address(), 16, 16, 3, 2));
        run({flat_span, {}, volume.span(), {100, 2, 1}, {16, 3, 2}});
        const auto got = read_all(flat.device_address(), 16 * 3 * 2);
        for (std::size_t z = 0; z < 2; ++z)
            for (std::size_t y = 0; y < 3; ++y)
                for (std::size_t x = 0; x < 16; ++x)
                    REQUIRE(got[(z * 3 + y) * 16 + x] == pinned[((z + 1) * kHeight + (y + 2)) * kWidth + (x + 100)]);
    }
    // 2D: one layer of the volume out to pinned memory with a wider pitch.
    auto rows = take(cudyn::PinnedBuffer<unsigned char>::allocate(512 * kHeight));
    const auto wide = take(PitchedSpan::host(rows.data(), kWidth, 512, kHeight));
    require_ok(cudyn::copy_2d({wide, {}, volume.span(), {0, 0, 3}, {kWidth, kHeight, 1}}, stream));
    require_ok(stream.synchronize());
    for (std::size_t y = 0; y < kHeight; ++y)
        for (std::size_t x = 0; x < kWidth; ++x)
            REQUIRE(rows[y * 512 + x] == pinned[(3 * kHeight + y) * kWidth + x]);
}

TEST_CASE("gpu: 2D sets of 8, 16 and 32 bits and 16-bit fills", "[gpu][copy-3d]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(PitchedBuffer::allocate(64, 4, 2));
    set_all(buffer, 0x77);
    const auto left = take(PitchedSpan::device(buffer.device_address(), 32, buffer.pitch(), 4, 2));
    require_ok(left.fill(std::uint16_t{0xA1B2}, stream));
    require_ok(stream.synchronize());
    auto stored = read_all(buffer.device_address(), buffer.size_bytes());
    for (std::size_t row = 0; row < 8; ++row)
        for (std::size_t x = 0; x < buffer.pitch(); ++x)
            REQUIRE(stored[row * buffer.pitch() + x] == (x < 32 ? (x % 2 == 0 ? 0xB2 : 0xA1) : 0x77));
    require_ok(buffer.span().fill(std::uint32_t{0x0A0B0C0D}));
    stored = read_all(buffer.device_address(), buffer.size_bytes());
    CHECK(stored[7 * buffer.pitch() + 60] == 0x0D);
    CHECK(stored[7 * buffer.pitch() + 63] == 0x0A);
    CHECK(stored[7 * buffer.pitch() + 64] == 0x77);
    require_ok(buffer.span().fill(std::uint8_t{5}));
    CHECK(read_all(buffer.device_address() + buffer.pitch(), 1)[0] == 5);

    auto halves = take(cudyn::DeviceBuffer<std::uint16_t>::allocate(1001));
    require_ok(halves.fill(std::uint16_t{0xBEEF}, stream));
    require_ok(stream.synchronize());
    std::vector<std::uint16_t> back(1001);
    require_ok(halves.copy_to(cudyn::HostSpan<std::uint16_t>(back.data(), back.size())));
    CHECK(back == std::vector<std::uint16_t>(1001, 0xBEEF));
}

TEST_CASE("gpu: CopyPlan 3D copies through every path, with and without copy options", "[gpu][copy-3d]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    const cudyn::DriverTable& cu = cudyn::driver();
    auto volume = take(PitchedBuffer::allocate(kWidth, kHeight, kDepth));
    auto pinned = take(cudyn::PinnedBuffer<unsigned char>::allocate(kBytes));
    fill_pattern(pinned.data(), kBytes, 9);
    auto managed = take(cudyn::ManagedBuffer<unsigned char>::allocate(kBytes));
    std::vector<CopyPlan::Path> paths{CopyPlan::Path::PerCopy};
    if (cu.cuMemcpy3DBatchAsync_v13000 && cu.cuMemcpyBatchAsync_v13000) paths.push_back(CopyPlan::Path::Batch13000);
    if (cu.cuMemcpy3DBatchAsync_v12080 && cu.cuMemcpyBatchAsync_v12080) paths.push_back(CopyPlan::Path::Batch12080);
    for (const CopyPlan::Path path : paths) {
        for (const bool options : {false, true}) {
            INFO(cudyn::to_string(path) << (options ? ", with options" : ""));
            set_all(volume, 0);
            CopyPlan plan;
            cudyn::CopyOptions hints;
            hints.source_hint = cudyn::Location::host();
            hints.destination_hint = cudyn::Location::device(0);
            hints.prefer_overlap_with_compute = true;
            if (options) require_ok(plan.set_options(hints));
            // Two halves of each layer's rows, then the volume into managed memory.
            const auto source = take(PitchedSpan::host(static_cast<const void*>(pinned.data()), kWidth, kWidth,
                                                       kHeight, kDepth));
            require_ok(plan.add_3d({volume.span(), {}, source, {}, {kWidth / 2, kHeight, kDepth}}));
            require_ok(plan.add_3d({volume.span(), {kWidth / 2, 0, 0}, source, {kWidth / 2, 0, 0},
                                    {kWidth - kWidth / 2, kHeight, kDepth}}));
            const auto into_managed =
                take(PitchedSpan::device(managed.device_address(), kWidth, kWidth, kHeight, kDepth));
            require_ok(plan.add_3d({into_managed, {}, source, {}, {kWidth, kHeight, kDepth}}, hints));
            CHECK(take(plan.execute_via(path, stream)) == path);
            require_ok(stream.synchronize());
            check_pitched(volume, pinned.data(), 0);
            for (std::size_t i = 0; i < kBytes; ++i) REQUIRE(managed[i] == pinned[i]);
        }
    }
}

TEST_CASE("gpu: discard, then prefetch and write: the memory is usable and the rest kept", "[gpu][discard]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    constexpr std::size_t kWords = 1 << 20;        // 4 MiB
    constexpr std::size_t kQuarter = kWords / 4;  // 1 MiB of words
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(kWords));
    for (std::size_t i = 0; i < kWords; ++i) buffer[i] = static_cast<std::uint32_t>(i);
    const auto whole = take(buffer.managed_range());
    const auto first = take(whole.subrange(0, kQuarter * 4));             // words [0, kQuarter)
    const auto second = take(whole.subrange(kQuarter * 4, kQuarter * 4));  // words [kQuarter, 2 kQuarter)

    cudyn::PrefetchPlan discard;
    require_ok(discard.add_discard(first));
    require_ok(discard.add_discard_and_prefetch(second, cudyn::Location::device(0)));
    require_ok(discard.execute(stream));
    cudyn::PrefetchPlan prefetch;
    require_ok(prefetch.add(first, cudyn::Location::device(0)));
    require_ok(prefetch.execute(stream));
    // Written again on the device, in stream order: determinate from here.
    require_ok(take(buffer.device_span().subspan(0, 2 * kQuarter)).fill(0xC0FFEEu, stream));
    require_ok(stream.synchronize());
    for (std::size_t i = 0; i < 2 * kQuarter; ++i) REQUIRE(buffer[i] == 0xC0FFEEu);
    // The half never discarded still holds its bytes.
    for (std::size_t i = 2 * kQuarter; i < kWords; ++i) REQUIRE(buffer[i] == static_cast<std::uint32_t>(i));
}
