// NVML through cudyn against the fake NVML (tests/fakenvml): the load report,
// NVLink states and fabric health for a healthy fabric, a degraded one, one
// still registering, a failed registration and no fabric; an NVML too old
// for fabric queries; no NVML at all. The fake reads its knobs at each call,
// so one process walks the scenarios of one NVML.
#include "support/catch.hpp"
#include "support/scoped_knob.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvlink.hpp"
#include "cudyn/nvml/nvml_library.hpp"

#include <cstdlib>
#include <string>

namespace {

using cudyn_test::ScopedKnob;

cudyn::DeviceUuid uuid_of(int ordinal) {
    auto device = cudyn::Device::get(ordinal);
    REQUIRE(device.has_value());
    auto uuid = device->uuid();
    REQUIRE(uuid.has_value());
    return *uuid;
}

}  // namespace

TEST_CASE("NVML loads from CUDYN_NVML_PATH and reports the kernel module's driver", "[emulated][nvml]") {
    const cudyn::NvmlReport& report = cudyn::nvml_report();
    REQUIRE(report.state == cudyn::NvmlState::Loaded);
    CHECK(report.library_path.find("libnvidia-ml.so.1") != std::string::npos);
    CHECK(report.kernel_driver_version == "580.65.06");
    CHECK(report.cuda_driver_version == 13000);
    CHECK(cudyn::nvml_status().has_value());
}

TEST_CASE("fabric health: healthy, degraded, registering, failed, none", "[emulated][nvml]") {
    const cudyn::DeviceUuid gpu0 = uuid_of(0);
    const cudyn::DeviceUuid gpu1 = uuid_of(1);
    {
        auto fabric = cudyn::gpu_fabric(gpu0);
        REQUIRE(fabric.has_value());
        CHECK(fabric->state == cudyn::FabricState::Completed);
        CHECK(fabric->healthy());
        CHECK(fabric->problems().empty());
        CHECK_FALSE(fabric->cluster_uuid.is_zero());
        CHECK(fabric->clique_id == 1);
        auto other = cudyn::gpu_fabric(gpu1);
        REQUIRE(other.has_value());
        CHECK(other->cluster_uuid == fabric->cluster_uuid);  // one domain
    }
    {
        ScopedKnob clique("FAKENVML_CLIQUE", "1:7");
        auto other = cudyn::gpu_fabric(gpu1);
        REQUIRE(other.has_value());
        CHECK(other->clique_id == 7);
    }
    {
        ScopedKnob knob("FAKENVML_FABRIC", "degraded");
        auto fabric = cudyn::gpu_fabric(gpu0);
        REQUIRE(fabric.has_value());
        CHECK(fabric->state == cudyn::FabricState::Completed);
        CHECK_FALSE(fabric->healthy());
        CHECK(fabric->problems() == "degraded bandwidth, route unhealthy");
    }
    {
        ScopedKnob knob("FAKENVML_FABRIC", "in_progress");
        auto fabric = cudyn::gpu_fabric(gpu0);
        REQUIRE(fabric.has_value());
        CHECK(fabric->state == cudyn::FabricState::InProgress);
        CHECK(fabric->problems() == "fabric registration in progress");
    }
    {
        ScopedKnob knob("FAKENVML_FABRIC", "failed");
        auto fabric = cudyn::gpu_fabric(gpu0);
        REQUIRE(fabric.has_value());
        CHECK(fabric->problems().find("registration failed") != std::string::npos);
    }
    {
        ScopedKnob knob("FAKENVML_FABRIC", "standalone");
        auto fabric = cudyn::gpu_fabric(gpu0);
        REQUIRE(fabric.has_value());
        CHECK(fabric->state == cudyn::FabricState::Completed);
        CHECK(fabric->status == 0);
        CHECK(fabric->cluster_uuid.is_zero());
        CHECK_FALSE(fabric->in_cluster());
        CHECK_FALSE(fabric->healthy());
        CHECK(fabric->problems().find("in no fabric cluster") != std::string::npos);
    }
    {
        ScopedKnob knob("FAKENVML_FABRIC", "none");
        auto fabric = cudyn::gpu_fabric(gpu0);
        REQUIRE(fabric.has_value());
        CHECK(fabric->state == cudyn::FabricState::NotSupported);
        CHECK(fabric->cluster_uuid.is_zero());  // no fabric cluster
        CHECK_FALSE(fabric->healthy());
        CHECK(std::string(cudyn::to_string(fabric->state)) == "not_supported");
    }

    cudyn::DeviceUuid unknown = gpu0;
    unknown.bytes[0] ^= 0xff;
    auto missing = cudyn::gpu_fabric(unknown);
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(missing.error().message.find(unknown.to_string()) != std::string::npos);
}

TEST_CASE("NVLink states: every link, inactive ones named, none without NVLink", "[emulated][nvml]") {
    const cudyn::DeviceUuid gpu1 = uuid_of(1);
    {
        auto links = cudyn::nvlink_states(gpu1);
        REQUIRE(links.has_value());
        REQUIRE(links->size() == 18);
        for (const cudyn::NvLinkState& link : *links) CHECK(link.active);
        CHECK(links->back().link == 17);
    }
    {
        ScopedKnob links_knob("FAKENVML_NVLINKS", "4");
        ScopedKnob down("FAKENVML_NVLINK_DOWN", "1:2,0:3");
        auto links = cudyn::nvlink_states(gpu1);
        REQUIRE(links.has_value());
        REQUIRE(links->size() == 4);
        CHECK((*links)[0].active);
        CHECK_FALSE((*links)[2].active);  // device 1, link 2
        CHECK((*links)[3].active);        // link 3 is down on device 0 only
    }
    {
        ScopedKnob links_knob("FAKENVML_NVLINKS", "0");
        auto links = cudyn::nvlink_states(gpu1);
        REQUIRE(links.has_value());
        CHECK(links->empty());
    }
}

TEST_CASE("an NVML older than fabric queries: NotSupported naming the entry, links still answer",
          "[emulated][nvml-old]") {
    REQUIRE(cudyn::nvml_report().state == cudyn::NvmlState::Loaded);
    auto fabric = cudyn::gpu_fabric(uuid_of(0));
    REQUIRE_FALSE(fabric.has_value());
    CHECK(fabric.error().code == cudyn::ErrorCode::NotSupported);
    CHECK(fabric.error().entry_point == "nvmlDeviceGetGpuFabricInfoV");
    auto links = cudyn::nvlink_states(uuid_of(0));
    REQUIRE(links.has_value());
    CHECK(links->size() == 18);
}

TEST_CASE("no NVML: a typed absence, and the driver still works", "[emulated][nvml-missing]") {
    const cudyn::NvmlReport& report = cudyn::nvml_report();
    CHECK(report.state == cudyn::NvmlState::NotFound);
    CHECK(report.message.find("/nonexistent/cudyn-test/libnvidia-ml.so.1") != std::string::npos);
    auto fabric = cudyn::gpu_fabric(uuid_of(0));
    REQUIRE_FALSE(fabric.has_value());
    CHECK(fabric.error().code == cudyn::ErrorCode::DriverNotFound);
    CHECK(fabric.error().message.find("NVML is not usable") != std::string::npos);
    auto links = cudyn::nvlink_states(uuid_of(0));
    REQUIRE_FALSE(links.has_value());
    CHECK(links.error().code == cudyn::ErrorCode::DriverNotFound);
    CHECK(cudyn::Device::count().has_value());
}
