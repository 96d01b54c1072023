// Loader behaviour with no driver: run with CUDYN_DRIVER_PATH at an absolute
// path where nothing exists (tests/meson.build sets it), so the result is the
// same on a GPU machine.
#include "support/catch.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/device/stream.hpp"

#include <cstdlib>
#include <string>

TEST_CASE("a missing driver gives not_found and DriverNotFound from every call", "[unit][not-found]") {
    const char* requested = std::getenv("CUDYN_DRIVER_PATH");
    INFO("run through meson test, which points CUDYN_DRIVER_PATH at a missing file");
    REQUIRE(requested != nullptr);
    const cudyn::LoadReport& report = cudyn::load_report();
    CHECK(report.state == cudyn::LoadState::NotFound);
    CHECK(report.library_path.empty());
    CHECK(report.requested_path == requested);
    CHECK(report.message.find("could not open") == 0);
    CHECK(report.driver_version == 0);
    REQUIRE(report.entry_points.size() == cudyn::driver_entry_count);
    CHECK(report.resolved_count() == 0);

    auto status = cudyn::driver_status();
    REQUIRE_FALSE(status.has_value());
    CHECK(status.error().code == cudyn::ErrorCode::DriverNotFound);

    auto count = cudyn::Device::count();
    REQUIRE_FALSE(count.has_value());
    CHECK(count.error().code == cudyn::ErrorCode::DriverNotFound);

    auto stream = cudyn::Stream::create();
    REQUIRE_FALSE(stream.has_value());
    CHECK(stream.error().code == cudyn::ErrorCode::DriverNotFound);

    CHECK(cudyn::driver().cuInit_v2000 == nullptr);
    CHECK(cudyn::driver().cuMemAlloc_v3020 == nullptr);
    CHECK_FALSE(cudyn::has_entry(&cudyn::DriverTable::cuMemAlloc_v3020));
}

TEST_CASE("loader options cannot change after the first load", "[unit][not-found]") {
    (void)cudyn::load_report();
#if defined(_WIN32)
    auto late = cudyn::set_loader_options({"C:\\other\\nvcuda.dll"});
#else
    auto late = cudyn::set_loader_options({"/opt/other/libcuda.so.1"});
#endif
    REQUIRE_FALSE(late.has_value());
    CHECK(late.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(late.error().message.find("already loaded") != std::string::npos);
}
