// What probe_this_rank reports: the same answers probe_capabilities and the
// device give, on the emulated fake driver and on a GPU; on the fake (two
// devices, tests/mpi/meson.build turns fabric handles off on device 1) also
// one device keeping the rank out of a common capability, and an ordinal
// that is not a visible device recorded as the probe's failure, not thrown at
// the caller. Each device's capability trials match fingerprint_device's,
// and a fingerprint that fails is that device's answer, not the rank's.
#include "support/catch.hpp"

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/mpi/capability_agreement.hpp"
#include "cudyn/mpi/rank_record.hpp"
#include "cudyn/nvml/nvml_library.hpp"

#include <algorithm>
#include <chrono>
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
        REQUIRE(reported.uuid.has_value());
        CHECK(*reported.uuid == *device->uuid());
        REQUIRE(reported.pci_bus_id.has_value());
        CHECK(*reported.pci_bus_id == *device->pci_bus_id());
    }
    const auto bytes = record.to_bytes();
    auto back = cudyn::mpi::RankRecord::from_bytes(bytes.data(), bytes.size());
    REQUIRE(back.has_value());
    REQUIRE(back->devices.size() == record.devices.size());
    for (std::size_t d = 0; d < record.devices.size(); ++d) CHECK(back->devices[d].uuid == record.devices[d].uuid);
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

TEST_CASE("probe_this_rank: each device's fabric domain, where NVML reports one", "[emulated][mpi-probe]") {
    const cudyn::mpi::RankRecord record = cudyn::mpi::probe_this_rank();
    REQUIRE(record.devices.size() == 2);
    if (cudyn::nvml_report().state != cudyn::NvmlState::Loaded) {
        // No NVML (the fake NVML is Linux's): no domain, and the probe still completes.
        CHECK_FALSE(record.devices[0].fabric.has_value());
        CHECK_FALSE(record.probe_failure.has_value());
        return;
    }
    // The fake NVML's healthy fabric: one cluster, clique 1.
    REQUIRE(record.devices[0].fabric.has_value());
    CHECK(record.devices[0].fabric->healthy);
    CHECK(record.devices[0].fabric->clique_id == 1);
    CHECK(record.devices[1].fabric->cluster_uuid == record.devices[0].fabric->cluster_uuid);
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

TEST_CASE("probe_this_rank: each device's capability trials, as fingerprint_device runs them", "[emulated][gpu][mpi-probe]") {
    const cudyn::mpi::RankRecord record = cudyn::mpi::probe_this_rank();
    REQUIRE_FALSE(record.devices.empty());
    for (const cudyn::mpi::DeviceReport& reported : record.devices) {
        INFO("device " << reported.ordinal);
        REQUIRE(reported.fingerprint.has_value());
        CHECK_FALSE(reported.fingerprint->failure.has_value());
        auto direct = cudyn::fingerprint_device(*cudyn::Device::get(reported.ordinal));
        REQUIRE(direct.has_value());
        CHECK(reported.fingerprint->newest_ptx_isa == direct->newest_ptx_isa);
        for (const auto& trial : cudyn::capability_trial_list) {
            INFO(trial.name);
            CHECK(reported.fingerprint->outcome(trial.name) == (*direct.*trial.field).outcome);
        }
    }
    // As a peer reads it: the record's trials and PTX ISA agree with itself.
    const auto bytes = record.to_bytes();
    auto back = cudyn::mpi::RankRecord::from_bytes(bytes.data(), bytes.size());
    REQUIRE(back.has_value());
    const auto agreement = cudyn::mpi::agree_on_capabilities({*back, record});
    CHECK(agreement.fingerprint_failed.empty());
    for (const auto& shortfall : agreement.trial_shortfalls) {
        INFO(shortfall.trial);
        CHECK(shortfall.unknown.empty());
        CHECK(shortfall.failed.size() == 2);  // both copies of this rank, never one alone
    }
    int lowest = record.devices.front().fingerprint->newest_ptx_isa;
    for (const auto& device : record.devices) lowest = std::min(lowest, device.fingerprint->newest_ptx_isa);
    CHECK(agreement.min_ptx_isa == lowest);
}

TEST_CASE("probe_this_rank: the emulated driver's trials work on both devices; PTX ISA 9.0", "[emulated][mpi-probe]") {
    const cudyn::mpi::RankRecord record = cudyn::mpi::probe_this_rank();
    REQUIRE(record.devices.size() == 2);
    const auto agreement = cudyn::mpi::agree_on_capabilities({record});
    CHECK(agreement.min_ptx_isa == 90);
    for (const char* trial : {"vmm", "vmm_posix_fd", "memory_pools", "pool_posix_fd", "ptx_jit"}) {
        INFO(trial);
        CHECK(agreement.trial_common(trial));
    }
    // A Linux build skips the Win32 trial: not common, and said so.
    const auto* win32 = agreement.trial_shortfall("vmm_win32");
    REQUIRE(win32 != nullptr);
    REQUIRE(win32->failed.size() == 1);
    CHECK(win32->failed[0].outcome == cudyn::TrialOutcome::Skipped);
}

TEST_CASE("probe_this_rank: trials not asked for, or a fingerprint that fails, leave the rank in", "[emulated][mpi-probe]") {
    cudyn::mpi::RankProbeOptions options;
    options.trials = false;
    const cudyn::mpi::RankRecord without = cudyn::mpi::probe_this_rank(options);
    REQUIRE(without.devices.size() == 2);
    for (const auto& device : without.devices) CHECK_FALSE(device.fingerprint.has_value());
    const auto unknown = cudyn::mpi::agree_on_capabilities({without});
    CHECK(unknown.common_trials.empty());
    CHECK(unknown.trial_shortfall("vmm")->unknown == std::vector<int>{0});
    CHECK(unknown.min_ptx_isa == 0);

    // fingerprint_device refuses a timeout that is not positive: recorded per
    // device, the capabilities still read and the probe not stopped.
    options.trials = true;
    options.trial_timeout = std::chrono::milliseconds{0};
    const cudyn::mpi::RankRecord failed = cudyn::mpi::probe_this_rank(options);
    CHECK_FALSE(failed.probe_failure.has_value());
    REQUIRE(failed.devices.size() == 2);
    for (const auto& device : failed.devices) {
        REQUIRE(device.fingerprint.has_value());
        REQUIRE(device.fingerprint->failure.has_value());
        CHECK(device.fingerprint->failure->code == cudyn::ErrorCode::InvalidArgument);
        CHECK(device.fingerprint->outcome("vmm") == cudyn::TrialOutcome::Skipped);
        CHECK(device.capabilities.virtual_memory_management);
    }
    const auto agreement = cudyn::mpi::agree_on_capabilities({failed});
    CHECK(agreement.fingerprint_failed == std::vector<int>{0});
    CHECK(agreement.probe_failed.empty());
    CHECK(agreement.common_trials.empty());
}
