// NVML's loader without NVML: a relative CUDYN_NVML_PATH is refused before
// anything is opened, and the refusal is a typed answer. Its own process
// (NVML is loaded once per process), run with that variable set.
#include "support/catch.hpp"

#include "cudyn/device/device_identity.hpp"
#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvml_library.hpp"

#include <string>

TEST_CASE("a relative CUDYN_NVML_PATH is refused, and every NVML call says so", "[nvml-refused]") {
    const cudyn::NvmlReport& report = cudyn::nvml_report();
    CHECK(report.state == cudyn::NvmlState::Refused);
    CHECK(report.requested_path == "relative/libnvidia-ml.so.1");
    CHECK(report.library_path.empty());
    CHECK(report.message.find("must be an absolute path") != std::string::npos);
    auto status = cudyn::nvml_status();
    REQUIRE_FALSE(status.has_value());
    CHECK(status.error().code == cudyn::ErrorCode::DriverRefused);
    auto fabric = cudyn::gpu_fabric(cudyn::DeviceUuid{});
    REQUIRE_FALSE(fabric.has_value());
    CHECK(fabric.error().code == cudyn::ErrorCode::DriverRefused);
    CHECK(std::string(cudyn::to_string(report.state)) == "refused");
}
