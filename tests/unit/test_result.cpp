// Result<T> and Error: the library's error contract, no driver needed.
#include "../support/catch.hpp"

#include "cudyn/error.hpp"
#include "cudyn/result.hpp"

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
}
