// What probe_this_rank reports: the same answers probe_capabilities and the
// device give, on the emulated fake driver and on a GPU; on the fake (two
// devices, tests/mpi/meson.build turns fabric handles off on device 1) also
// one device keeping the rank out of a common capability, and an ordinal
// that is not a visible device recorded as the probe's failure, not thrown at
// the caller.
#include "../support/catch.hpp"

#include "cudyn/device.hpp"
#include "cudyn/device_capabilities.hpp"
#include "cudyn/loader.hpp"
#include "cudyn/mpi/capability_agreement.hpp"
#include "cudyn/mpi/rank_record.hpp"

#include <vector>

TEST_CASE("probe_this_rank: every visible device, as probe_capabilities reads it", "[emulated][gpu][mpi-probe]") {
    const cudyn::mpi::RankRecord record = cudyn::mpi::probe_this_rank();
    REQUIRE(record.driver_loaded());
    CHECK(record.driver_version == cudyn::load_report().driver_version);
    CHECK(record.visible_devices == *cudyn::Device::count());
    CHECK_FALSE(record.probe_failure.has_value());
    REQUIRE(record.devices.size() == static_cast<std::size_t>(record.visible_devices));
    for (const cudyn::mpi::DeviceReport& reported : record.devices) {
        auto device = cudyn::Device::get(reported.ordinal);
        REQUIRE(device.has_value());
        auto capabilities = cudyn::probe_capabilities(*device);
        REQUIRE(capabilities.has_value());
        for (const auto& row : cudyn::device_capability_list) CHECK(reported.capabilities.*row.field == (*capabilities).*row.field);
        CHECK(reported.compute.major == device->compute_capability()->major);
    }
    const auto bytes = record.to_bytes();
    auto back = cudyn::mpi::RankRecord::from_bytes(bytes.data(), bytes.size());
    REQUIRE(back.has_value());
    CHECK(back->devices.size() == record.devices.size());
    CHECK(back->host == record.host);
}

TEST_CASE("probe_this_rank: one device without a capability keeps the rank out of it", "[emulated][mpi-probe]") {
    const cudyn::mpi::RankRecord record = cudyn::mpi::probe_this_rank();
    REQUIRE(record.devices.size() == 2);
    CHECK(record.devices[0].capabilities.fabric_handles);
    CHECK_FALSE(record.devices[1].capabilities.fabric_handles);

    // Through the bytes, as a peer reads it: device 1 keeps this rank out of
    // the common fabric capability, device 0 alone does not.
    const auto bytes = record.to_bytes();
    auto back = cudyn::mpi::RankRecord::from_bytes(bytes.data(), bytes.size());
    REQUIRE(back.has_value());
    const auto agreement = cudyn::mpi::agree_on_capabilities({*back});
    CHECK_FALSE(agreement.common.fabric_handles);
    CHECK(agreement.common.virtual_memory_management);
    CHECK(agreement.shortfall("fabric_handles")->lacking == std::vector<int>{0});
    const auto only_device_0 = cudyn::mpi::probe_this_rank({{0}});
    REQUIRE(only_device_0.devices.size() == 1);
    CHECK(cudyn::mpi::agree_on_capabilities({only_device_0}).common.fabric_handles);
}

TEST_CASE("probe_this_rank: an ordinal past the visible devices stops the probe there", "[emulated][mpi-probe]") {
    const cudyn::mpi::RankRecord record = cudyn::mpi::probe_this_rank({{1, 5, 0, 1}});
    REQUIRE(record.probe_failure.has_value());
    CHECK(record.probe_failure->code == cudyn::ErrorCode::InvalidArgument);
    // Sorted and without repeats: 0 and 1 were read before 5 failed.
    REQUIRE(record.devices.size() == 2);
    CHECK(record.devices[0].ordinal == 0);
    CHECK(record.devices[1].ordinal == 1);
    CHECK(cudyn::mpi::agree_on_capabilities({record}).probe_failed == std::vector<int>{0});
}
