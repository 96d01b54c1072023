// DeviceSpan on the fake drivers that emulate memory: copies and fills on
// every kind of device-addressed memory (device, mapped host, managed,
// registered host), device-to-device between kinds, subspans and byte views,
// bad input refused before the driver, and driver failures reported.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <string>
#include <vector>

using cudyn::DeviceSpan;
using cudyn::ErrorCode;
using namespace cudyn_test;  // FakeDriver, ScopedFault, activate, DriverSnapshot, require_error

namespace {

// Fill, host round trip and a subspan on one span, synchronously and on `stream`.
void exercise_span(DeviceSpan<std::uint32_t> span, const cudyn::Stream& stream) {
    REQUIRE(span.size() == 256);
    REQUIRE(span.fill(0xA5A5A5A5u).has_value());
    CHECK(read_device(span.device_address(), 256) == std::vector<std::uint32_t>(256, 0xA5A5A5A5u));

    const auto values = iota_vector(256, 40);
    REQUIRE(span.copy_from(values).has_value());
    CHECK(read_device(span.device_address(), 256) == values);
    std::vector<std::uint32_t> back(256);
    REQUIRE(span.copy_to(back).has_value());
    CHECK(back == values);

    auto middle = span.subspan(100, 10);
    REQUIRE(middle.has_value());
    CHECK(middle->device_address() == span.device_address() + 400);
    REQUIRE(middle->fill(7u, stream).has_value());
    REQUIRE(middle->set_bytes(0, stream).has_value());
    const std::vector<std::uint32_t> head = {1, 2, 3};
    REQUIRE(middle->copy_from(head, stream).has_value());
    std::vector<std::uint32_t> middle_back(10);
    REQUIRE(middle->copy_to(middle_back, stream).has_value());
    REQUIRE(stream.synchronize().has_value());
    CHECK(middle_back == std::vector<std::uint32_t>{1, 2, 3, 0, 0, 0, 0, 0, 0, 0});
    const auto all = read_device(span.device_address(), 256);
    CHECK(all[99] == 139);  // untouched either side
    CHECK(all[110] == 150);
}

}  // namespace

namespace {
// Whether a span type offers writes (compile-time: a read-only span must not).
template <typename Span, typename = void>
struct can_fill : std::false_type {};
template <typename Span>
struct can_fill<Span, std::void_t<decltype(std::declval<const Span&>().fill(0u))>> : std::true_type {};
template <typename Span, typename = void>
struct can_copy_into : std::false_type {};
template <typename Span>
struct can_copy_into<Span, std::void_t<decltype(std::declval<const Span&>().copy_from(
                               std::declval<const std::vector<std::uint32_t>&>()))>> : std::true_type {};
}  // namespace

TEST_CASE("DeviceSpan copies and fills device, mapped, managed and registered memory",
          "[emulated][cuda11][legacy][device-span]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto stream = cudyn::Stream::create();
        REQUIRE(stream.has_value());

        auto device = cudyn::DeviceBuffer<std::uint32_t>::allocate(256);
        REQUIRE(device.has_value());
        CHECK(device->device_span().device_address() == device->device_address());
        exercise_span(device->device_span(), *stream);

        auto mapped = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(256);
        REQUIRE(mapped.has_value());
        CHECK(mapped->device_span().device_address() == mapped->device_address());
        exercise_span(mapped->device_span(), *stream);
        CHECK((*mapped)[0] == 40);  // the host sees the device side's bytes in place
        CHECK((*mapped)[102] == 3);

        auto managed = cudyn::ManagedBuffer<std::uint32_t>::allocate(256);
        REQUIRE(managed.has_value());
        exercise_span(managed->device_span(), *stream);
        CHECK((*managed)[255] == 295);

        std::vector<std::uint32_t> caller(256);
        cudyn::HostRegisterFlags flags;
        flags.device_mapped = true;
        auto registered = cudyn::HostRegistration::register_span(cudyn::HostSpan<std::uint32_t>(caller), flags);
        REQUIRE(registered.has_value());
        auto registered_span = registered->device_span_as<std::uint32_t>();
        REQUIRE(registered_span.has_value());
        exercise_span(*registered_span, *stream);
        CHECK(caller[101] == 2);

        // Device to device across kinds: managed -> device -> mapped.
        REQUIRE(managed->device_span().fill(9u).has_value());
        REQUIRE(device->device_span().copy_from(managed->device_span()).has_value());
        REQUIRE(mapped->device_span().copy_from(device->device_span(), *stream).has_value());
        REQUIRE(stream->synchronize().has_value());
        CHECK(std::vector<std::uint32_t>(mapped->begin(), mapped->end()) == std::vector<std::uint32_t>(256, 9u));
        // A smaller source lands at the start and leaves the rest.
        auto first_half = managed->device_span().subspan(0, 128);
        REQUIRE(first_half.has_value());
        REQUIRE(first_half->fill(1u).has_value());
        REQUIRE(device->device_span().copy_from(*first_half).has_value());
        const auto words = read_device(device->device_address(), 256);
        CHECK(words[127] == 1);
        CHECK(words[128] == 9);

        // One-byte elements fill with cuMemsetD8.
        auto chars = cudyn::DeviceBuffer<char>::allocate(13);
        REQUIRE(chars.has_value());
        REQUIRE(chars->device_span().fill('z').has_value());
        std::string text(13, ' ');
        REQUIRE(chars->device_span().copy_to(cudyn::HostSpan<char>(text.data(), text.size())).has_value());
        CHECK(text == std::string(13, 'z'));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("DeviceSpan views of raw bytes are checked for size and alignment", "[emulated][cuda11][legacy][device-span]") {
    auto context = activate(0);
    auto bytes = cudyn::DeviceBuffer<unsigned char>::allocate(64);
    REQUIRE(bytes.has_value());
    const CUdeviceptr base = bytes->device_address();

    auto words = DeviceSpan<std::uint32_t>::from_bytes(base, 64);
    REQUIRE(words.has_value());
    CHECK(words->size() == 16);
    CHECK(words->size_bytes() == 64);
    require_error(DeviceSpan<std::uint32_t>::from_bytes(base, 63), ErrorCode::InvalidArgument,
                  "63 bytes is not a whole number of 4-byte elements");
    require_error(DeviceSpan<std::uint32_t>::from_bytes(base + 2, 60), ErrorCode::InvalidArgument,
                  "not aligned to the element's 4 bytes");
    require_error(DeviceSpan<std::uint32_t>::from_bytes(0, 16), ErrorCode::InvalidArgument, "16 bytes at address 0");
    auto none = DeviceSpan<std::uint32_t>::from_bytes(base, 0);
    REQUIRE(none.has_value());
    CHECK(none->empty());
    CHECK(none->device_address() == 0);  // an empty span points nowhere

    auto tail = words->subspan(12, 4);
    REQUIRE(tail.has_value());
    CHECK(tail->device_address() == base + 48);
    require_error(words->subspan(12, 5), ErrorCode::InvalidArgument, "elements [12, 12 + 5) run past the 16");
    require_error(words->subspan(std::numeric_limits<std::size_t>::max(), 1), ErrorCode::InvalidArgument,
                  "run past the 16");
    // Empty views are valid, as for std::span, up to the end (not past it);
    // operations on them are refused.
    auto empty_end = words->subspan(16, 0);
    REQUIRE(empty_end.has_value());
    CHECK(empty_end->empty());
    require_error(words->subspan(17, 0), ErrorCode::InvalidArgument, "run past");
    require_error(empty_end->fill(7u), ErrorCode::InvalidArgument, "empty");

    // A span of T is a read-only span of const T: a source for copies and
    // readable, not writable (writes into it do not compile).
    const cudyn::DeviceSpan<const std::uint32_t> read_only = *words;
    CHECK(read_only.device_address() == words->device_address());
    CHECK(read_only.size() == words->size());
    static_assert(can_fill<cudyn::DeviceSpan<std::uint32_t>>::value, "a writable span fills");
    static_assert(!can_fill<cudyn::DeviceSpan<const std::uint32_t>>::value, "a read-only span does not fill");
    static_assert(!can_copy_into<cudyn::DeviceSpan<const std::uint32_t>>::value, "nor is it copied into");
    static_assert(can_copy_into<cudyn::DeviceSpan<std::uint32_t>>::value, "a writable span is copied into");
    std::vector<std::uint32_t> read_back(16, 0);
    REQUIRE(read_only.copy_to(read_back).has_value());

    // Untyped memory gives checked views the same way.
    cudyn::HostRegistration unmapped;
    auto nothing = unmapped.device_span_as<std::uint32_t>();
    REQUIRE(nothing.has_value());
    CHECK(nothing->empty());
}

TEST_CASE("DeviceSpan refuses bad input before the driver, naming it", "[emulated][cuda11][legacy][device-span]") {
    auto context = activate(0);
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(16);
    auto other = cudyn::DeviceBuffer<std::uint32_t>::allocate(32);
    REQUIRE(buffer.has_value());
    REQUIRE(other.has_value());
    const DeviceSpan<std::uint32_t> span = buffer->device_span();
    const DriverSnapshot before({"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemsetD8_v2",
                                 "cuMemsetD32_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD32Async"});

    std::vector<std::uint32_t> host(16, 1);
    std::vector<std::uint32_t> too_many(17, 1);
    require_error(span.copy_from(cudyn::HostSpan<const std::uint32_t>(nullptr, 4)), ErrorCode::InvalidArgument,
                  "DeviceSpan::copy_from: source has a null data pointer");
    require_error(span.copy_from(cudyn::HostSpan<const std::uint32_t>(host.data(), 0)), ErrorCode::InvalidArgument,
                  "source is empty");
    require_error(span.copy_from(too_many), ErrorCode::InvalidArgument, "count 17 exceeds the size 16");
    require_error(span.copy_to(cudyn::HostSpan<std::uint32_t>(nullptr, 1)), ErrorCode::InvalidArgument,
                  "DeviceSpan::copy_to: destination has a null data pointer");
    require_error(span.copy_to(too_many, cudyn::Stream::legacy_default()), ErrorCode::InvalidArgument,
                  "DeviceSpan::copy_to: offset 0 + count 17");

    const DeviceSpan<std::uint32_t> empty;
    require_error(empty.fill(1u), ErrorCode::InvalidArgument, "DeviceSpan::fill: the destination is empty");
    require_error(empty.set_bytes(0), ErrorCode::InvalidArgument, "the destination is empty");
    require_error(empty.copy_from(host), ErrorCode::InvalidArgument, "the device span is empty");
    require_error(empty.copy_to(host), ErrorCode::InvalidArgument, "the device span is empty");
    require_error(span.copy_from(empty), ErrorCode::InvalidArgument, "source is empty");
    require_error(empty.copy_from(span), ErrorCode::InvalidArgument, "the destination is empty");

    // Device to device: fit, identity and overlap.
    require_error(span.copy_from(other->device_span()), ErrorCode::InvalidArgument,
                  "source (128 bytes) does not fit the destination (64 bytes)");
    require_error(span.copy_from(span), ErrorCode::InvalidArgument, "source is the destination itself");
    const auto front = span.subspan(0, 8).value();
    const auto shifted = span.subspan(4, 8).value();
    require_error(shifted.copy_from(front), ErrorCode::InvalidArgument, "source and destination overlap");
    require_error(front.copy_from(shifted, cudyn::Stream::legacy_default()), ErrorCode::InvalidArgument,
                  "DeviceSpan::copy_from: source and destination overlap");
    // Adjacent halves do not overlap.
    REQUIRE(span.subspan(8, 8).value().copy_from(front).has_value());
    CHECK(before.calls_since("cuMemcpyDtoD_v2") == 1);

    // A hand-made span whose byte size does not fit size_t never reaches the driver.
    const DeviceSpan<std::uint32_t> huge(buffer->device_address(), std::numeric_limits<std::size_t>::max() / 2);
    require_error(huge.fill(0u), ErrorCode::InvalidArgument, "overflows size_t");
    require_error(huge.copy_from(host), ErrorCode::InvalidArgument, "overflows size_t");
    require_error(span.copy_from(huge), ErrorCode::InvalidArgument, "overflows size_t");

    // A 32-bit fill over bytes that are not whole, aligned words.
    auto bytes = cudyn::DeviceBuffer<unsigned char>::allocate(10);
    REQUIRE(bytes.has_value());
    const auto misaligned = DeviceSpan<float>(bytes->device_address() + 2, 2);
    require_error(misaligned.fill(1.0f, cudyn::Stream::legacy_default()), ErrorCode::InvalidArgument,
                  "4-byte-aligned address");

    for (const char* entry : {"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8_v2", "cuMemsetD32_v2",
                              "cuMemcpyDtoDAsync_v2", "cuMemsetD32Async"}) {
        INFO(entry);
        CHECK(before.calls_since(entry) == 0);
    }
}

TEST_CASE("DeviceSpan reports the driver's failure with the entry that failed", "[emulated][cuda11][legacy][device-span]") {
    auto context = activate(0);
    auto buffer = cudyn::ManagedBuffer<std::uint32_t>::allocate(64);
    REQUIRE(buffer.has_value());
    const auto span = buffer->device_span();
    std::vector<std::uint32_t> host(64, 3);
    {
        ScopedFault fault("cuMemsetD32_v2:1:CUDA_ERROR_ILLEGAL_ADDRESS");
        require_error(span.fill(5u), ErrorCode::Driver, "cuMemsetD32_v2");
    }
    {
        ScopedFault fault("cuMemcpyHtoD_v2:1:CUDA_ERROR_INVALID_VALUE");
        auto copied = span.copy_from(host);
        REQUIRE_FALSE(copied.has_value());
        CHECK(copied.error().entry_point == std::string("cuMemcpyHtoD_v2"));
        CHECK(copied.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    }
    // After the injected failures the span works again.
    REQUIRE(span.copy_from(host).has_value());
    CHECK((*buffer)[63] == 3);
}
