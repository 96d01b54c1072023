// Pitched memory, 2D and 3D copies and sets, 3D copies in a CopyPlan
// ([copy-3d]), and the discards of a PrefetchPlan ([discard]), on the fake
// drivers: the bytes of every direction, what is refused before any driver
// call, which entry each path takes on each variant (the 3D batch in the
// 13.0 ABI on emulated, the 12.8 one on cuda12, one cuMemcpy3DAsync per copy
// on cuda11 and legacy), and what a discard leaves in memory.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/pitched_buffer.hpp"
#include "cudyn/memory/prefetch_plan.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using cudyn::CopyPlan;
using cudyn::ErrorCode;
using cudyn::Extent3D;
using cudyn::Offset3D;
using cudyn::PitchedBuffer;
using cudyn::PitchedCopy;
using cudyn::PitchedSpan;
using namespace cudyn_test;

namespace {

std::string variant() { return FakeDriver::loaded().variant(); }

// A host volume of `width` x `height` x `depth` bytes, tightly packed, each
// byte a function of its place.
std::vector<unsigned char> pattern(std::size_t width, std::size_t height, std::size_t depth, unsigned seed) {
    std::vector<unsigned char> bytes(width * height * depth);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + seed);
    return bytes;
}

PitchedSpan host_span(std::vector<unsigned char>& bytes, std::size_t width, std::size_t height, std::size_t depth) {
    return take(PitchedSpan::host(bytes.data(), width, width, height, depth));
}

// The bytes of a pitched buffer, row by row as stored (padding included).
std::vector<unsigned char> read_pitched(const PitchedBuffer& buffer) {
    std::vector<unsigned char> bytes(buffer.size_bytes());
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, bytes.data(), buffer.device_address(),
                               bytes.size())
                .has_value());
    return bytes;
}

}  // namespace

TEST_CASE("PitchedBuffer: cuMemAllocPitch's pitch, the shape, and bad input before the driver",
          "[emulated][cuda12][cuda11][legacy][copy-3d]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto buffer = take(PitchedBuffer::allocate(100, 6, 3));
    CHECK(buffer.width_bytes() == 100);
    CHECK(buffer.pitch() >= 100);
    CHECK(buffer.pitch() % 4 == 0);
    CHECK(buffer.height() == 6);
    CHECK(buffer.depth() == 3);
    CHECK(buffer.size_bytes() == buffer.pitch() * 18);
    const PitchedSpan span = buffer.span();
    CHECK(span.address() == buffer.device_address());
    CHECK(span.extent_bytes() == buffer.pitch() * 17 + 100);

    fake.reset_counts();
    require_error(PitchedBuffer::allocate(0, 4), ErrorCode::InvalidArgument, "width is 0");
    require_error(PitchedBuffer::allocate(4, 0), ErrorCode::InvalidArgument, "height is 0");
    require_error(PitchedBuffer::allocate(4, 4, 0), ErrorCode::InvalidArgument, "depth is 0");
    require_error(PitchedBuffer::allocate(4, 4, 1, 2), ErrorCode::InvalidArgument, "4, 8 or 16");
    constexpr std::size_t kHuge = std::numeric_limits<std::size_t>::max() / 2;
    require_error(PitchedBuffer::allocate(4, kHuge, 4), ErrorCode::InvalidArgument, "height x depth");
    CHECK(fake.call_count("cuMemAllocPitch_v2") == 0);

    require_ok(buffer.free());
    CHECK(buffer.empty());
    CHECK(buffer.span().empty());
    CHECK(buffer.span().extent_bytes() == 0);
}

TEST_CASE("PitchedSpan refuses a pitch below the width, empty shapes and overflow",
          "[emulated][cuda12][cuda11][legacy][copy-3d]") {
    std::vector<unsigned char> bytes(64);
    require_error(PitchedSpan::host(bytes.data(), 16, 8, 2), ErrorCode::InvalidArgument, "pitch (8 bytes) is below");
    require_error(PitchedSpan::device(0x1000, 16, 16, 0), ErrorCode::InvalidArgument, "height is 0");
    require_error(PitchedSpan::device(0, 16, 16, 1), ErrorCode::InvalidArgument, "address is 0");
    require_error(PitchedSpan::host(static_cast<void*>(nullptr), 16, 16, 1), ErrorCode::InvalidArgument, "null");
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    require_error(PitchedSpan::device(0x1000, 16, max / 4, 8), ErrorCode::InvalidArgument, "rows x pitch");
    require_error(PitchedSpan::device(max - 100, 16, 64, 4), ErrorCode::InvalidArgument, "PitchedSpan::device");
}

TEST_CASE("copy_2d and copy_3d move the bytes of every direction, synchronous and on a stream",
          "[emulated][cuda12][cuda11][legacy][copy-3d]") {
    auto context = activate(0);
    ScopedStreamDelay delay(300);
    auto stream = take(cudyn::Stream::create());
    constexpr std::size_t kWidth = 40, kHeight = 5, kDepth = 3;
    auto volume = take(PitchedBuffer::allocate(kWidth, kHeight, kDepth));
    auto other = take(PitchedBuffer::allocate(kWidth, kHeight, kDepth));
    // Every byte, padding included (a 2D fill leaves the padding).
    const cudyn::DriverTable& cu = cudyn::driver();
    REQUIRE(cu.cuMemsetD8_v3020(volume.device_address(), 0xAB, volume.size_bytes()) == CUDA_SUCCESS);
    REQUIRE(cu.cuMemsetD8_v3020(other.device_address(), 0xCD, other.size_bytes()) == CUDA_SUCCESS);
    // The sets return before they are done, and the stream below does not wait for them.
    REQUIRE(cu.cuStreamSynchronize_v2000(CU_STREAM_LEGACY) == CUDA_SUCCESS);
    std::vector<unsigned char> source = pattern(kWidth, kHeight, kDepth, 3);

    SECTION("host to device and back, whole volume, synchronous") {
        require_ok(cudyn::copy_3d({volume.span(), {}, host_span(source, kWidth, kHeight, kDepth), {}, {kWidth, kHeight, kDepth}}));
        std::vector<unsigned char> back(source.size(), 0);
        require_ok(cudyn::copy_3d({host_span(back, kWidth, kHeight, kDepth), {}, volume.span(), {}, {kWidth, kHeight, kDepth}}));
        CHECK(back == source);
        // The padding past each row's width is not written.
        const auto stored = read_pitched(volume);
        for (std::size_t row = 0; row < kHeight * kDepth; ++row)
            for (std::size_t x = kWidth; x < volume.pitch(); ++x) REQUIRE(stored[row * volume.pitch() + x] == 0xAB);
    }
    SECTION("a box with offsets on both sides, device to device, on a stream") {
        require_ok(cudyn::copy_3d({volume.span(), {}, host_span(source, kWidth, kHeight, kDepth), {}, {kWidth, kHeight, kDepth}}));
        const Extent3D box{8, 2, 2};
        require_ok(cudyn::copy_3d({other.span(), {4, 1, 0}, volume.span(), {10, 3, 1}, box}, stream));
        require_ok(stream.synchronize());
        const auto stored = read_pitched(other);
        for (std::size_t z = 0; z < kDepth; ++z)
            for (std::size_t y = 0; y < kHeight; ++y)
                for (std::size_t x = 0; x < kWidth; ++x) {
                    const bool inside = x >= 4 && x < 12 && y >= 1 && y < 3 && z < 2;
                    const unsigned char expected =
                        inside ? source[((z + 1) * kHeight + (y + 2)) * kWidth + (x + 6)] : 0xCD;
                    REQUIRE(stored[(z * kHeight + y) * other.pitch() + x] == expected);
                }
    }
    SECTION("2D: pitched host rows into one layer, and a layer's rows out through copy_2d") {
        constexpr std::size_t kHostPitch = 64;
        std::vector<unsigned char> rows(kHostPitch * kHeight, 0);
        for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<unsigned char>(i);
        const PitchedSpan pitched_host = take(PitchedSpan::host(rows.data(), kWidth, kHostPitch, kHeight));
        require_ok(cudyn::copy_2d({volume.span(), {0, 0, 2}, pitched_host, {}, {kWidth, kHeight, 1}}, stream));
        require_ok(stream.synchronize());
        std::vector<unsigned char> back(kWidth * kHeight, 0);
        require_ok(cudyn::copy_2d({host_span(back, kWidth, kHeight, 1), {}, volume.span(), {0, 0, 2}, {kWidth, kHeight, 1}}));
        for (std::size_t y = 0; y < kHeight; ++y)
            for (std::size_t x = 0; x < kWidth; ++x) REQUIRE(back[y * kWidth + x] == rows[y * kHostPitch + x]);
    }
}

TEST_CASE("copy_2d and copy_3d refuse boxes past a span, empty extents and read-only destinations before the driver",
          "[emulated][cuda12][cuda11][legacy][copy-3d]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto volume = take(PitchedBuffer::allocate(32, 4, 2));
    std::vector<unsigned char> host(32 * 4 * 2);
    const PitchedSpan source = host_span(host, 32, 4, 2);
    const PitchedSpan read_only = take(PitchedSpan::host(static_cast<const void*>(host.data()), 32, 32, 4, 2));
    fake.reset_counts();
    require_error(cudyn::copy_3d({volume.span(), {1, 0, 0}, source, {}, {32, 4, 2}}), ErrorCode::InvalidArgument,
                  "destination box runs past its span: bytes 1 + 32 > 32");
    require_error(cudyn::copy_3d({volume.span(), {}, source, {0, 3, 0}, {32, 2, 1}}), ErrorCode::InvalidArgument,
                  "source box runs past its span: rows 3 + 2 > 4");
    require_error(cudyn::copy_3d({volume.span(), {0, 0, 2}, source, {}, {32, 1, 1}}), ErrorCode::InvalidArgument,
                  "layers 2 + 1 > 2");
    const std::size_t max = std::numeric_limits<std::size_t>::max();
    require_error(cudyn::copy_3d({volume.span(), {max, 0, 0}, source, {}, {2, 1, 1}}), ErrorCode::InvalidArgument,
                  "runs past");
    require_error(cudyn::copy_3d({volume.span(), {}, source, {}, {0, 1, 1}}), ErrorCode::InvalidArgument,
                  "extent is empty");
    require_error(cudyn::copy_3d({read_only, {}, volume.span(), {}, {32, 4, 2}}), ErrorCode::InvalidArgument,
                  "read-only");
    require_error(cudyn::copy_2d({volume.span(), {}, source, {}, {32, 4, 2}}), ErrorCode::InvalidArgument,
                  "one layer");
    require_error(cudyn::copy_3d({PitchedSpan(), {}, source, {}, {32, 4, 2}}), ErrorCode::InvalidArgument,
                  "destination span is empty");
    CHECK(fake.call_count("cuMemcpy3D_v2") == 0);
    CHECK(fake.call_count("cuMemcpy2D_v2") == 0);
}

TEST_CASE("2D sets of 8, 16 and 32 bits fill each row's width and leave the padding; 16-bit fills of spans",
          "[emulated][cuda12][cuda11][legacy][copy-3d]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(PitchedBuffer::allocate(24, 3, 2));
    require_ok(buffer.span().fill(std::uint8_t{0x11}));
    const auto narrow = take(PitchedSpan::device(buffer.device_address(), 12, buffer.pitch(), 3, 2));
    require_ok(narrow.fill(std::uint16_t{0xBEEF}, stream));
    require_ok(stream.synchronize());
    auto stored = read_pitched(buffer);
    for (std::size_t row = 0; row < 6; ++row)
        for (std::size_t x = 0; x < 24; ++x) {
            const unsigned char expected = x < 12 ? (x % 2 == 0 ? 0xEF : 0xBE) : 0x11;
            REQUIRE(stored[row * buffer.pitch() + x] == expected);
        }
    require_ok(buffer.span().fill(std::uint32_t{0x01020304}));
    stored = read_pitched(buffer);
    CHECK(stored[buffer.pitch() * 5 + 20] == 0x04);
    CHECK(stored[buffer.pitch() * 5 + 23] == 0x01);

    require_error(take(PitchedSpan::device(buffer.device_address() + 1, 8, buffer.pitch(), 2)).fill(std::uint16_t{1}),
                  ErrorCode::InvalidArgument, "multiples of 2");
    require_error(take(PitchedSpan::device(buffer.device_address(), 6, buffer.pitch(), 2)).fill(std::uint32_t{1}),
                  ErrorCode::InvalidArgument, "whole number of 4-byte");
    std::vector<unsigned char> host(16);
    require_error(take(PitchedSpan::host(host.data(), 16, 16, 1)).fill(std::uint8_t{1}), ErrorCode::InvalidArgument,
                  "host memory");

    auto halves = take(cudyn::DeviceBuffer<std::uint16_t>::allocate(9));
    require_ok(halves.fill(std::uint16_t{0x1234}));
    std::vector<std::uint16_t> back(9);
    require_ok(halves.copy_to(cudyn::HostSpan<std::uint16_t>(back.data(), back.size())));
    CHECK(back == std::vector<std::uint16_t>(9, 0x1234));
}

TEST_CASE("CopyPlan::add_3d: one 3D batch in the path's ABI, or one cuMemcpy3DAsync per copy; mixed with 1D copies",
          "[emulated][cuda12][cuda11][legacy][copy-3d]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    ScopedStreamDelay delay(300);
    auto stream = take(cudyn::Stream::create());
    constexpr std::size_t kWidth = 64, kHeight = 4;
    auto image = take(PitchedBuffer::allocate(kWidth, kHeight));
    std::vector<unsigned char> source = pattern(kWidth, kHeight, 1, 9);
    auto flat_from = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(16));
    auto flat_to = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(16));
    require_ok(flat_from.copy_from(iota_vector(16, 500)));

    CopyPlan plan;
    // Left and right halves of the same rows: disjoint, so both are taken.
    const PitchedSpan from = host_span(source, kWidth, kHeight, 1);
    require_ok(plan.add_3d({image.span(), {}, from, {}, {kWidth / 2, kHeight, 1}}));
    require_ok(plan.add_3d({image.span(), {kWidth / 2, 0, 0}, from, {kWidth / 2, 0, 0}, {kWidth / 2, kHeight, 1}}));
    require_ok(plan.add(flat_to.device_span(), cudyn::DeviceSpan<const std::uint32_t>(flat_from.device_span())));
    CHECK(plan.size() == 3);
    // A third copy into part of the second's rows is refused, naming it.
    require_error(plan.add_3d({image.span(), {40, 1, 0}, from, {}, {4, 1, 1}}), ErrorCode::InvalidArgument,
                  "overlaps the destination of copy 1");
    // A box that reads what it writes.
    require_error(plan.add_3d({image.span(), {0, 0, 0}, image.span(), {0, 1, 0}, {8, 2, 1}}),
                  ErrorCode::InvalidArgument, "source box overlaps its destination box");
    CHECK(plan.size() == 3);

    fake.reset_counts();
    const auto path = take(plan.execute(stream));
    require_ok(stream.synchronize());
    std::vector<unsigned char> back(kWidth * kHeight);
    require_ok(cudyn::copy_2d({host_span(back, kWidth, kHeight, 1), {}, image.span(), {}, {kWidth, kHeight, 1}}));
    CHECK(back == source);
    CHECK(read_device(flat_to.device_address(), 16) == iota_vector(16, 500));
    if (variant() == "emulated") {
        CHECK(path == CopyPlan::Path::Batch13000);
        CHECK(fake.call_count("cuMemcpy3DBatchAsync_v2") == 1);
        CHECK(fake.call_count("cuMemcpy3DAsync_v2") == 0);
    } else if (variant() == "cuda12") {
        CHECK(path == CopyPlan::Path::Batch12080);
        CHECK(fake.call_count("cuMemcpy3DBatchAsync") == 1);
        CHECK(fake.call_count("cuMemcpy3DAsync_v2") == 0);
    } else {
        CHECK(path == CopyPlan::Path::PerCopy);
        CHECK(fake.call_count("cuMemcpy3DAsync_v2") == 2);
    }
    // The legacy default stream and the per-copy path take cuMemcpy3DAsync everywhere.
    fake.reset_counts();
    CHECK(take(plan.execute_via(CopyPlan::Path::PerCopy, stream)) == CopyPlan::Path::PerCopy);
    require_ok(stream.synchronize());
    CHECK(fake.call_count("cuMemcpy3DAsync_v2") == 2);
    CHECK(fake.call_count("cuMemcpy3DBatchAsync") + fake.call_count("cuMemcpy3DBatchAsync_v2") == 0);
}

TEST_CASE("the fake's cuMemcpy3DBatchAsync refuses at the call and the 12.8 ABI names the operation",
          "[emulated][cuda12][copy-3d]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(64));
    CUDA_MEMCPY3D_BATCH_OP ops[2]{};
    for (auto& op : ops) {
        op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        op.extent = {16, 2, 1};
    }
    ops[0].src.op.ptr.ptr = buffer.device_address();
    ops[0].dst.op.ptr.ptr = buffer.device_address() + 64;
    ops[1] = ops[0];
    ops[1].src.op.ptr.ptr = buffer.device_address() + 128;
    ops[1].dst.op.ptr.ptr = buffer.device_address() + 248;  // two rows of 16 run 8 bytes past the 256
    const cudyn::DriverTable& cu = cudyn::driver();
    if (cu.cuMemcpy3DBatchAsync_v12080) {
        std::size_t failed = 0;
        CHECK(cu.cuMemcpy3DBatchAsync_v12080(2, ops, &failed, 0, stream.handle()) == CUDA_ERROR_INVALID_VALUE);
        CHECK(failed == 1);
        ops[1].dst.op.ptr.ptr = buffer.device_address() + 192;
        ops[1].dst.op.ptr.layerHeight = 1;  // below the extent's height
        CHECK(cu.cuMemcpy3DBatchAsync_v12080(2, ops, &failed, 0, stream.handle()) == CUDA_ERROR_INVALID_VALUE);
        CHECK(failed == 1);
        ops[1].dst.op.ptr.layerHeight = 0;
        CHECK(cu.cuMemcpy3DBatchAsync_v12080(2, ops, &failed, 1, stream.handle()) == CUDA_ERROR_INVALID_VALUE);
        CHECK(cu.cuMemcpy3DBatchAsync_v12080(2, ops, &failed, 0, CU_STREAM_LEGACY) == CUDA_ERROR_INVALID_VALUE);
        CHECK(cu.cuMemcpy3DBatchAsync_v12080(2, ops, &failed, 0, stream.handle()) == CUDA_SUCCESS);
        CHECK(failed == SIZE_MAX);
    }
    CHECK((cu.cuMemcpy3DBatchAsync_v13000 != nullptr) == (variant() == "emulated"));
    CHECK(fake.call_count("cuMemcpy3DBatchAsync_ptsz") == 0);
    require_ok(stream.synchronize());
}

TEST_CASE("PrefetchPlan discards: cuMemDiscardBatchAsync poisons in stream order on 13.0; elsewhere nothing is issued",
          "[emulated][cuda11][legacy][discard]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    ScopedStreamDelay delay(300);
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::uint32_t>(i);
    const auto whole = take(buffer.managed_range());
    const auto half = take(whole.subrange(0, 2048));

    cudyn::PrefetchPlan plan;
    require_ok(plan.add_discard(half));
    CHECK(plan.size() == 1);
    fake.reset_counts();
    require_ok(plan.execute(stream));
    require_ok(stream.synchronize());
    const auto* bytes = reinterpret_cast<const unsigned char*>(buffer.data());
    if (variant() == "emulated") {
        CHECK(fake.call_count("cuMemDiscardBatchAsync") == 1);
        for (std::size_t i = 0; i < 2048; ++i) REQUIRE(bytes[i] == FAKECUDA_DISCARD_POISON);
    } else {
        CHECK(fake.call_count("cuMemDiscardBatchAsync") == 0);
        CHECK(buffer[0] == 0);
        CHECK(buffer[511] == 511);
    }
    CHECK(buffer[512] == 512);  // past the discarded half
    CHECK(buffer[1023] == 1023);

    // Synchronous: the legacy default stream, which the batch refuses: nothing is issued.
    buffer[0] = 42;
    fake.reset_counts();
    require_ok(plan.execute());
    CHECK(fake.call_count("cuMemDiscardBatchAsync") == 0);
    CHECK(buffer[0] == 42);
}

TEST_CASE("PrefetchPlan discard-and-prefetch: one batch call on 13.0, a prefetch per range elsewhere",
          "[emulated][cuda11][legacy][discard]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = 7;
    const auto whole = take(buffer.managed_range());

    cudyn::PrefetchPlan plan;
    require_ok(plan.add_discard_and_prefetch(whole, cudyn::Location::device(0)));
    require_error(plan.add_discard_and_prefetch(whole, cudyn::Location::device(-1)), ErrorCode::InvalidArgument,
                  "add_discard_and_prefetch");
    fake.reset_counts();
    const int prefetches_before = fake.prefetch_count();
    require_ok(plan.execute(stream));
    require_ok(stream.synchronize());
    REQUIRE(fake.prefetch_count() == prefetches_before + 1);
    const fakecuda_record record = fake.prefetch(prefetches_before);
    CHECK(record.ptr == whole.device_address());
    CHECK(record.size == whole.size_bytes());
    CHECK(record.location_type == CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK(record.location_id == 0);
    if (variant() == "emulated") {
        CHECK(std::string(record.entry) == "cuMemDiscardAndPrefetchBatchAsync");
        CHECK(buffer[0] == 0xDDDDDDDDu);
    } else {
        CHECK(fake.call_count("cuMemDiscardAndPrefetchBatchAsync") == 0);
        CHECK(buffer[0] == 7);
    }
}

TEST_CASE("CopyOptions: per-copy and plan-wide hints and the overlap flag, grouped into one batch, checked first",
          "[emulated][cuda12][copy-3d]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto stream = take(cudyn::Stream::create());
    auto from = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(8192));
    auto to = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(8192));
    require_ok(from.copy_from(iota_vector(8192, 1)));
    const CUdeviceptr source = from.device_address();
    const CUdeviceptr target = to.device_address();

    CopyPlan plan;
    cudyn::CopyOptions on_device;
    on_device.destination_hint = cudyn::Location::device(1);
    on_device.prefer_overlap_with_compute = true;
    cudyn::CopyOptions from_host;
    from_host.source_hint = cudyn::Location::host();
    require_ok(plan.set_options(from_host));
    // Four copies, three option sets between them, interleaved.
    require_ok(plan.add_bytes(target, source, 4096, on_device));
    require_ok(plan.add_bytes(target + 4096, source + 4096, 4096));
    require_ok(plan.add_bytes(target + 8192, source + 8192, 4096, on_device));
    cudyn::CopyOptions none;
    require_ok(plan.add_bytes(target + 12288, source + 12288, 4096, none));
    cudyn::CopyOptions negative;
    negative.source_hint = cudyn::Location::device(-1);
    require_error(plan.add_bytes(target + 16384, source + 16384, 16, negative), ErrorCode::InvalidArgument,
                  "source hint");
    require_error(plan.set_options(negative), ErrorCode::InvalidArgument, "CopyPlan::set_options: the source hint");
    CHECK(plan.options() == from_host);
    CHECK(plan.size() == 4);
    fake.reset_counts();
    (void)take(plan.execute(stream));
    require_ok(stream.synchronize());
    CHECK(read_device(target, 4096) == iota_vector(4096, 1));
    CHECK(fake.call_count("cuMemcpyBatchAsync") + fake.call_count("cuMemcpyBatchAsync_v2") == 1);

    // A device hint past the visible devices: refused before any call, naming the hint.
    cudyn::CopyOptions off_device;
    off_device.destination_hint = cudyn::Location::device(7);
    require_ok(plan.add_bytes(target + 16384, source + 16384, 64, off_device));
    fake.reset_counts();
    require_error(plan.execute(stream), ErrorCode::InvalidArgument,
                  "destination location hint (device 7) is not one of the 2 visible devices");
    CHECK(fake.call_count("cuMemcpyBatchAsync") + fake.call_count("cuMemcpyBatchAsync_v2") == 0);

    // The fake, as cuda.h describes the driver, refuses such a hint itself.
    CUmemcpyAttributes attributes{};
    attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attributes.dstLocHint = off_device.destination_hint->to_cu();
    CUdeviceptr destinations[] = {target};
    CUdeviceptr sources[] = {source};
    std::size_t sizes[] = {64};
    std::size_t first = 0;
    std::size_t failed = 0;
    const cudyn::DriverTable& cu = cudyn::driver();
    const CUresult raw = cu.cuMemcpyBatchAsync_v13000
                             ? cu.cuMemcpyBatchAsync_v13000(destinations, sources, sizes, 1, &attributes, &first, 1,
                                                            stream.handle())
                             : cu.cuMemcpyBatchAsync_v12080(destinations, sources, sizes, 1, &attributes, &first, 1,
                                                            &failed, stream.handle());
    CHECK(raw == CUDA_ERROR_INVALID_VALUE);

    // 3D copies carry their options in the operation.
    auto image = take(PitchedBuffer::allocate(64, 2));
    std::vector<unsigned char> host = pattern(64, 2, 1, 1);
    CopyPlan volumes;
    require_ok(volumes.add_3d({image.span(), {}, host_span(host, 64, 2, 1), {}, {64, 2, 1}}, on_device));
    (void)take(volumes.execute(stream));
    require_ok(stream.synchronize());
    std::vector<unsigned char> back(128);
    require_ok(cudyn::copy_2d({host_span(back, 64, 2, 1), {}, image.span(), {}, {64, 2, 1}}));
    CHECK(back == host);
}
