// A relative override is refused and nothing is loaded. Run with
// CUDYN_DRIVER_PATH set to a relative path (tests/meson.build).
#include "support/catch.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/loader.hpp"

#include <string>

TEST_CASE("a relative CUDYN_DRIVER_PATH is refused with a clear error", "[refused]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    CHECK(report.state == cudyn::LoadState::Refused);
    CHECK(report.library_path.empty());
    CHECK(report.message.find("CUDYN_DRIVER_PATH must be an absolute path") == 0);
    CHECK(report.resolved_count() == 0);

    auto count = cudyn::Device::count();
    REQUIRE_FALSE(count.has_value());
    CHECK(count.error().code == cudyn::ErrorCode::DriverRefused);
    CHECK(count.error().message.find("absolute path") != std::string::npos);
}
