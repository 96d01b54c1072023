// Result <-> std::expected, built as C++23 where the compiler has <expected>
// (the library itself stays C++17).
#include "support/catch.hpp"

#include "cudyn/core/result.hpp"

#include <expected>
#include <string>

#ifndef CUDYN_HAS_STD_EXPECTED
#error "this test is only built where <expected> is available"
#endif

TEST_CASE("Result converts to and from std::expected in one call", "[unit][result][expected]") {
    const std::expected<int, cudyn::Error> good = cudyn::to_expected(cudyn::Result<int>(5));
    REQUIRE(good.has_value());
    CHECK(*good == 5);

    std::expected<std::string, cudyn::Error> bad = std::unexpected(cudyn::Error::invalid_argument("bad size"));
    const cudyn::Result<std::string> back = cudyn::from_expected(std::move(bad));
    REQUIRE_FALSE(back.has_value());
    CHECK(back.error().message == "bad size");

    const std::expected<void, cudyn::Error> done = cudyn::to_expected(cudyn::ok());
    CHECK(done.has_value());
    const cudyn::Result<void> refused =
        cudyn::from_expected(std::expected<void, cudyn::Error>(std::unexpected(cudyn::Error::invalid_argument("no"))));
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == cudyn::ErrorCode::InvalidArgument);
}
