// LoaderOptions given before first use override the environment.
#include "support/catch.hpp"

#include "cudyn/loader/loader.hpp"

#include <string>

TEST_CASE("LoaderOptions: relative paths refused, absolute ones used, frozen after load", "[options]") {
#if defined(_WIN32)
    auto relative = cudyn::set_loader_options({"nvcuda.dll"});
#else
    auto relative = cudyn::set_loader_options({"libcuda.so.1"});
#endif
    REQUIRE_FALSE(relative.has_value());
    CHECK(relative.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(relative.error().message.find("absolute") != std::string::npos);

#if defined(_WIN32)
    const std::string chosen = "C:\\nonexistent\\cudyn-options-test\\nvcuda.dll";
#else
    const std::string chosen = "/nonexistent/cudyn-options-test/libcuda.so.1";
#endif
    REQUIRE(cudyn::set_loader_options({chosen}).has_value());

    const cudyn::LoadReport& report = cudyn::load_report();
    CHECK(report.requested_path == chosen);  // options win over CUDYN_DRIVER_PATH
    CHECK(report.state == cudyn::LoadState::NotFound);

    auto again = cudyn::set_loader_options({chosen});
    CHECK_FALSE(again.has_value());
}
