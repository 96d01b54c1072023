// Result<T> and Error: the library's error contract, no driver needed.
#include "support/catch.hpp"

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"

#include <memory>
#include <string>

namespace {

cudyn::Result<int> parse_positive(int value) {
    if (value <= 0) return cudyn::Error::invalid_argument("value must be positive, got " + std::to_string(value));
    return value;
}

cudyn::Result<int> doubled(int value) {
    auto parsed = parse_positive(value);
    if (!parsed) return parsed.error();
    return *parsed * 2;
}

cudyn::Result<void> propagate(int value) {
    CUDYN_TRY(parse_positive(value));
    return cudyn::ok();
}

}  // namespace

TEST_CASE("Result holds a value or an error", "[unit][result]") {
    auto good = doubled(21);
    REQUIRE(good.has_value());
    REQUIRE(static_cast<bool>(good));
    CHECK(good.value() == 42);
    CHECK(good.value_or(0) == 42);

    auto bad = doubled(-1);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(bad.error().message == "value must be positive, got -1");
    CHECK(bad.value_or(7) == 7);
}

TEST_CASE("Result<void> and CUDYN_TRY propagate the first failure", "[unit][result]") {
    CHECK(propagate(1).has_value());
    auto failed = propagate(0);
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().code == cudyn::ErrorCode::InvalidArgument);
}

TEST_CASE("Result carries move-only values", "[unit][result]") {
    cudyn::Result<std::unique_ptr<int>> owned(std::make_unique<int>(5));
    REQUIRE(owned.has_value());
    std::unique_ptr<int> taken = std::move(owned).value();
    CHECK(*taken == 5);
}

TEST_CASE("Result builds its value in place, and can become an error afterwards", "[unit][result]") {
    // A type that can be neither copied nor moved proves nothing was moved in.
    struct Pinned {
        Pinned(int a, int b) : sum(a + b) {}
        Pinned(const Pinned&) = delete;
        Pinned& operator=(const Pinned&) = delete;
        int sum;
    };
    const cudyn::Result<Pinned> built(std::in_place, 2, 3);
    REQUIRE(built.has_value());
    CHECK(built->sum == 5);

    cudyn::Result<std::string> filled(std::in_place, 3, 'x');
    CHECK(*filled == "xxx");
    filled = cudyn::Error::invalid_argument("late failure");  // what an exporter does when the driver refuses
    REQUIRE_FALSE(filled.has_value());
    CHECK(filled.error().code == cudyn::ErrorCode::InvalidArgument);
}

namespace {

struct MoveOnly {
    explicit MoveOnly(int v) : value(v) {}
    MoveOnly(MoveOnly&&) = default;
    MoveOnly& operator=(MoveOnly&&) = default;
    MoveOnly(const MoveOnly&) = delete;
    MoveOnly& operator=(const MoveOnly&) = delete;
    int value;
};

cudyn::Result<MoveOnly> make_move_only(int value) {
    if (value < 0) return cudyn::Error::invalid_argument("negative");
    return MoveOnly(value);
}

cudyn::Result<int> sum_of_two(int a, int b) {
    CUDYN_TRY_ASSIGN(const int first, parse_positive(a));
    CUDYN_TRY_ASSIGN(auto second, parse_positive(b));
    return first + second;
}

cudyn::Result<int> assign_to_existing(int a) {
    int existing = 0;
    CUDYN_TRY_ASSIGN(existing, parse_positive(a));
    return existing;
}

}  // namespace

TEST_CASE("operator* of an rvalue Result moves the value out (move-only types)", "[unit][result]") {
    MoveOnly taken = *make_move_only(4);
    CHECK(taken.value == 4);
    auto held = make_move_only(6);
    MoveOnly moved = *std::move(held);
    CHECK(moved.value == 6);
}

TEST_CASE("CUDYN_TRY_ASSIGN binds the value or returns the error", "[unit][result]") {
    auto both = sum_of_two(2, 3);
    REQUIRE(both.has_value());
    CHECK(*both == 5);
    auto second_bad = sum_of_two(2, -3);
    REQUIRE_FALSE(second_bad.has_value());
    CHECK(second_bad.error().message == "value must be positive, got -3");
    CHECK(*assign_to_existing(9) == 9);
    CHECK_FALSE(assign_to_existing(0).has_value());
}

TEST_CASE("and_then, transform, or_else and transform_error follow std::expected", "[unit][result]") {
    const auto halve = [](int v) -> cudyn::Result<int> {
        if (v % 2 != 0) return cudyn::Error::invalid_argument("odd");
        return v / 2;
    };
    CHECK(*parse_positive(8).and_then(halve) == 4);
    CHECK(parse_positive(7).and_then(halve).error().message == "odd");
    CHECK(parse_positive(-1).and_then(halve).error().message == "value must be positive, got -1");

    CHECK(*parse_positive(3).transform([](int v) { return std::to_string(v); }) == "3");
    int seen = 0;
    cudyn::Result<void> side_effect = parse_positive(5).transform([&seen](int v) { seen = v; });
    CHECK(side_effect.has_value());
    CHECK(seen == 5);
    CHECK_FALSE(parse_positive(0).transform([](int v) { return v * 2; }).has_value());

    const auto recover = [](const cudyn::Error&) -> cudyn::Result<int> { return 1; };
    CHECK(*parse_positive(0).or_else(recover) == 1);
    CHECK(*parse_positive(2).or_else(recover) == 2);

    auto reworded = parse_positive(0).transform_error([](cudyn::Error e) {
        e.message = "while reading the size: " + e.message;
        return e;
    });
    CHECK(reworded.error().message == "while reading the size: value must be positive, got 0");
    CHECK(reworded.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(*parse_positive(4).transform_error([](cudyn::Error e) { return e; }) == 4);

    // Move-only values travel through the rvalue forms.
    auto doubled_move_only = make_move_only(21).transform([](MoveOnly m) { return MoveOnly(m.value * 2); });
    CHECK(doubled_move_only->value == 42);
    auto chained = make_move_only(1).and_then([](MoveOnly m) { return make_move_only(m.value + 1); });
    CHECK(chained->value == 2);
}

TEST_CASE("Result<void> chains the same way", "[unit][result]") {
    const cudyn::Result<void> good = cudyn::ok();
    const cudyn::Result<void> bad = cudyn::Error::invalid_argument("no");
    CHECK(*good.and_then([] { return cudyn::Result<int>(3); }) == 3);
    CHECK(bad.and_then([] { return cudyn::Result<int>(3); }).error().message == "no");
    CHECK(*good.transform([] { return 7; }) == 7);
    CHECK_FALSE(bad.transform([] { return 7; }).has_value());
    CHECK(bad.or_else([](const cudyn::Error&) { return cudyn::ok(); }).has_value());
    CHECK(bad.transform_error([](cudyn::Error e) {
                 e.message += "!";
                 return e;
             })
              .error()
              .message == "no!");
    CHECK(good.transform_error([](cudyn::Error e) { return e; }).has_value());
}

namespace {

// Says how it was made: a copy would pass any check of the value alone.
struct Traced {
    int value = 0;
    bool copied = false;
    bool moved_from = false;
    explicit Traced(int v) : value(v) {}
    Traced(const Traced& other) : value(other.value), copied(true) {}
    Traced(Traced&& other) noexcept : value(other.value) { other.moved_from = true; }
    Traced& operator=(const Traced&) = delete;
    Traced& operator=(Traced&&) = delete;
};

}  // namespace

TEST_CASE("value_or on an rvalue moves the value; on an lvalue it copies", "[unit][result]") {
    cudyn::Result<Traced> held(Traced(7));
    const Traced taken = std::move(held).value_or(Traced(0));
    CHECK(taken.value == 7);
    CHECK_FALSE(taken.copied);
    REQUIRE(held.has_value());
    CHECK(held->moved_from);  // the value left the Result

    cudyn::Result<Traced> kept(Traced(8));
    const Traced copy = kept.value_or(Traced(0));
    CHECK(copy.copied);
    CHECK_FALSE(kept->moved_from);

    CHECK(cudyn::Result<std::string>(cudyn::Error::invalid_argument("x")).value_or("fallback") == "fallback");
}

TEST_CASE("Error maps driver results to typed codes", "[unit][error]") {
    using cudyn::Error;
    using cudyn::ErrorCode;
    CHECK(Error::from_driver(CUDA_ERROR_STUB_LIBRARY, "cuInit").code == ErrorCode::StubDriver);
    CHECK(Error::from_driver(CUDA_ERROR_NOT_SUPPORTED, "cuMemCreate").code == ErrorCode::NotSupported);
    CHECK(Error::from_driver(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2").code == ErrorCode::OutOfMemory);
    const Error invalid = Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc_v2");
    CHECK(invalid.code == ErrorCode::Driver);
    CHECK(invalid.driver_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(invalid.describe().find("cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE (1)") == 0);
}

TEST_CASE("CUresult names come from the table generated from cuda.h", "[unit][error]") {
    CHECK(std::string(cudyn::cuda_error_name(CUDA_SUCCESS)) == "CUDA_SUCCESS");
    CHECK(std::string(cudyn::cuda_error_name(CUDA_ERROR_STUB_LIBRARY)) == "CUDA_ERROR_STUB_LIBRARY");
    CHECK(std::string(cudyn::cuda_error_name(CUDA_ERROR_NO_DEVICE)) == "CUDA_ERROR_NO_DEVICE");
    CHECK(std::string(cudyn::cuda_error_name(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)) == "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH");
    CHECK(std::string(cudyn::cuda_error_description(CUDA_ERROR_OUT_OF_MEMORY)).find("unable to allocate") !=
          std::string::npos);
    CHECK(std::string(cudyn::cuda_error_name(static_cast<CUresult>(123456))) == "CUDA_ERROR_UNKNOWN_CODE");
}

TEST_CASE("ErrorCode names are stable", "[unit][error]") {
    CHECK(std::string(cudyn::to_string(cudyn::ErrorCode::NotSupported)) == "not_supported");
    CHECK(std::string(cudyn::to_string(cudyn::ErrorCode::DriverNotFound)) == "driver_not_found");
    CHECK(std::string(cudyn::to_string(cudyn::ErrorCode::StubDriver)) == "stub_driver");
    CHECK(std::string(cudyn::to_string(cudyn::ErrorCode::DriverInitFailed)) == "driver_init_failed");
    CHECK(std::string(cudyn::to_string(cudyn::ErrorCode::InvalidArgument)) == "invalid_argument");
    CHECK(std::string(cudyn::to_string(cudyn::ErrorCode::PermissionDenied)) == "permission_denied");
    CHECK(cudyn::Error::permission_denied("uid 65534 is not admitted").describe() ==
          "permission_denied: uid 65534 is not admitted");
}
