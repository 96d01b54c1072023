// The capability fingerprint ([fingerprint]) on every fake that emulates
// memory: the trials' answers follow what the driver really does (a refusal
// injected behind an attribute that says yes), each trial leaves nothing
// allocated, failures are told apart from refusals, and a trial that does not
// return is cut off at its time limit.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"

#include <chrono>
#include <string>

using cudyn::CapabilityFingerprint;
using cudyn::TrialOutcome;
using namespace cudyn_test;

namespace {

// What a fingerprint may leave behind: nothing.
struct Baseline {
    long allocations = FakeDriver::loaded().live_allocations();
    long pools = FakeDriver::loaded().live_pools();
    long modules = FakeDriver::loaded().live_modules();
    int context_retains = FakeDriver::loaded().primary_ctx_refcount(0);
    void require_unchanged() const {
        CHECK(FakeDriver::loaded().live_allocations() == allocations);
        CHECK(FakeDriver::loaded().live_pools() == pools);
        CHECK(FakeDriver::loaded().live_modules() == modules);
        CHECK(FakeDriver::loaded().primary_ctx_refcount(0) == context_retains);
    }
};

CapabilityFingerprint fingerprint_of_device0(cudyn::FingerprintOptions options = {}) {
    auto device = take(cudyn::Device::get(0));
    return take(cudyn::fingerprint_device(device, options));
}

}  // namespace

TEST_CASE("a fingerprint reports what each driver generation can do and leaves nothing behind",
          "[emulated][cuda11][legacy][fingerprint]") {
    const Baseline before;
    const CapabilityFingerprint print = fingerprint_of_device0();
    before.require_unchanged();
    CHECK(print.device == 0);
    const std::string variant = FakeDriver::loaded().variant();
    INFO(variant);
    if (variant == "legacy") {
        // CUDA 10.1: no cuMemCreate, no pools; its JIT takes PTX up to 6.4.
        CHECK(print.vmm.outcome == TrialOutcome::Refused);
        CHECK(print.vmm.detail.find("cuMemGetAllocationGranularity") != std::string::npos);
        CHECK(print.memory_pools.outcome == TrialOutcome::Refused);
        CHECK(print.newest_ptx_isa == 64);
    } else {
        CHECK(print.vmm.outcome == TrialOutcome::Works);
        CHECK(print.vmm_posix_fd.outcome == TrialOutcome::Works);
        CHECK(print.memory_pools.outcome == TrialOutcome::Works);
        CHECK(print.pool_posix_fd.outcome == TrialOutcome::Works);
        CHECK(print.newest_ptx_isa == (variant == "cuda11" ? 78 : 90));
    }
    CHECK(print.ptx_jit.outcome == TrialOutcome::Works);
    // Checkpointing arrived with 12.8: refused, naming the entry, before it.
    if (variant == "legacy" || variant == "cuda11") {
        CHECK(print.checkpoint.outcome == TrialOutcome::Refused);
        CHECK(print.checkpoint.detail.find("cuCheckpointProcessGetState") != std::string::npos);
    } else {
        CHECK(print.checkpoint.outcome == TrialOutcome::Works);
    }
    CHECK(print.vmm_win32.outcome == TrialOutcome::Skipped);  // a Linux build
    for (const cudyn::CapabilityTrialInfo& trial : cudyn::capability_trial_list) {
        INFO(trial.name);
        const cudyn::TrialResult& result = print.*trial.field;
        CHECK(result.milliseconds >= 0);
        CHECK((result.outcome == TrialOutcome::Works) == result.detail.empty());
    }
}

TEST_CASE("a trial tells a refusal behind a 'yes' attribute from a failure, and a release that failed",
          "[emulated][cuda11][fingerprint]") {
    auto device = take(cudyn::Device::get(0));
    REQUIRE(take(device.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)) == 1);
    SECTION("the attribute says yes, the export is refused: refused, with the driver's answer") {
        const Baseline before;
        const ScopedFault fault("cuMemExportToShareableHandle:1:CUDA_ERROR_NOT_PERMITTED");
        const CapabilityFingerprint print = fingerprint_of_device0();
        CHECK(print.vmm_posix_fd.outcome == TrialOutcome::Refused);
        CHECK(print.vmm_posix_fd.driver_result == CUDA_ERROR_NOT_PERMITTED);
        CHECK(print.vmm.outcome == TrialOutcome::Works);
        before.require_unchanged();  // the refused export's memory was released
    }
    SECTION("fabric advertised without an IMEX channel: the creation is refused, the attribute still says yes") {
        const Baseline before;
        if (take(device.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)) == 0) {
            // CUDA 11.8 has no fabric handles: the attribute and the trial agree.
            const CapabilityFingerprint print = fingerprint_of_device0();
            CHECK(print.vmm_fabric.outcome == TrialOutcome::Refused);
            CHECK(print.vmm_fabric.driver_result == CUDA_ERROR_NOT_SUPPORTED);
        } else {
            // No IMEX channel: the fake's default, as on every machine measured.
            const CapabilityFingerprint print = fingerprint_of_device0();
            CHECK(print.vmm_fabric.outcome == TrialOutcome::Refused);
            CHECK(print.vmm_fabric.driver_result == CUDA_ERROR_NOT_PERMITTED);
            CHECK(print.fabric_export.outcome == TrialOutcome::Refused);
            CHECK(print.vmm.outcome == TrialOutcome::Works);
            // The pool trial creates a fabric pool and never exports it:
            // that much a machine without a channel did.
            CHECK(print.pool_fabric.outcome == TrialOutcome::Works);
        }
        before.require_unchanged();
    }
    SECTION("out of memory says nothing about the capability: failed") {
        const Baseline before;
        const ScopedFault fault("cuMemCreate:1:CUDA_ERROR_OUT_OF_MEMORY");
        const CapabilityFingerprint print = fingerprint_of_device0();
        CHECK(print.vmm.outcome == TrialOutcome::Failed);
        CHECK(print.vmm.driver_result == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(print.vmm_posix_fd.outcome == TrialOutcome::Works);
        before.require_unchanged();
    }
    SECTION("a release the driver refused makes the trial failed, naming what is left") {
        long leaked = 0;
        {
            const ScopedFault fault("cuMemPoolDestroy:1:CUDA_ERROR_INVALID_CONTEXT");
            const Baseline before;
            const CapabilityFingerprint print = fingerprint_of_device0();
            CHECK(print.memory_pools.outcome == TrialOutcome::Failed);
            CHECK(print.memory_pools.detail.find("left allocated") != std::string::npos);
            leaked = FakeDriver::loaded().live_pools() - before.pools;
        }
        CHECK(leaked == 1);  // the fake really kept the pool: the report is true
    }
}

TEST_CASE("a trial that does not return is cut off; the ones after it are skipped",
          "[emulated][fingerprint]") {
    cudyn::FingerprintOptions options;
    options.trial_timeout = std::chrono::milliseconds(100);
    {
        // cuMemPoolCreate answers 1.5 s late: the memory_pools trial overruns.
        const ScopedFault fault("cuMemPoolCreate:1:SLOW=1500");
        const auto start = std::chrono::steady_clock::now();
        const CapabilityFingerprint print = fingerprint_of_device0(options);
        const auto waited = std::chrono::steady_clock::now() - start;
        CHECK(waited < std::chrono::milliseconds(1200));
        CHECK(print.vmm.outcome == TrialOutcome::Works);  // before the stuck one
        CHECK(print.memory_pools.outcome == TrialOutcome::TimedOut);
        CHECK(print.pool_posix_fd.outcome == TrialOutcome::Skipped);
        CHECK(print.ptx_jit.outcome == TrialOutcome::Skipped);
    }
    auto device = take(cudyn::Device::get(0));
    options.trial_timeout = std::chrono::milliseconds(0);
    require_error(cudyn::fingerprint_device(device, options), cudyn::ErrorCode::InvalidArgument, "trial_timeout");
}
