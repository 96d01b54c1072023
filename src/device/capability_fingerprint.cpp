// cudyn — fingerprint_device: the trials of capability_trials.def, run one
// after the other on a worker thread with the device's primary context current.
#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "core/process_identity.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#ifndef _WIN32
#include <unistd.h>
#endif

namespace cudyn {

const char* to_string(TrialOutcome outcome) noexcept {
    switch (outcome) {
        case TrialOutcome::Works: return "works";
        case TrialOutcome::Refused: return "refused";
        case TrialOutcome::Failed: return "failed";
        case TrialOutcome::Skipped: return "skipped";
        case TrialOutcome::TimedOut: return "timed_out";
    }
    return "unknown";
}

namespace {

// Answers that mean "this driver, device or node cannot do it", as opposed to
// a failure that says nothing about the capability (out of memory, a lost
// context). INVALID_VALUE is among them because it is how the driver refuses
// a location or handle type it does not take (a HOST allocation with a POSIX
// handle type, a NUMA node that is not one); the trials pass only values that
// are valid where the capability exists.
bool is_refusal(CUresult result) {
    switch (result) {
        case CUDA_ERROR_NOT_SUPPORTED:
        case CUDA_ERROR_INVALID_VALUE:
        case CUDA_ERROR_INVALID_DEVICE:
        case CUDA_ERROR_NOT_PERMITTED:
        case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        case CUDA_ERROR_INVALID_PTX:
        case CUDA_ERROR_INVALID_IMAGE:
        case CUDA_ERROR_NO_BINARY_FOR_GPU:
        case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
            return true;
        default:
            return false;
    }
}

TrialResult works() { return TrialResult{TrialOutcome::Works, CUDA_SUCCESS, {}, 0}; }

TrialResult skipped(std::string why) { return TrialResult{TrialOutcome::Skipped, CUDA_SUCCESS, std::move(why), 0}; }

// A failed step of a trial: a missing entry is a refusal (this driver cannot),
// as is a refusing answer; anything else failed.
TrialResult outcome_of(const Error& error, const char* step) {
    TrialResult result;
    result.driver_result = error.driver_result;
    const bool missing_entry = error.code == ErrorCode::NotSupported && error.driver_result == CUDA_SUCCESS;
    result.outcome =
        missing_entry || is_refusal(error.driver_result) ? TrialOutcome::Refused : TrialOutcome::Failed;
    // describe() names the entry point when a driver call failed; the step
    // names what was being done otherwise (an attribute read).
    result.detail = error.entry_point.empty() ? std::string(step) + ": " + error.describe() : error.describe();
    return result;
}

// What a trial took back failed to go: the trial says so, and what is left.
TrialResult not_released(const Error& error, const char* what) {
    TrialResult result;
    result.outcome = TrialOutcome::Failed;
    result.driver_result = error.driver_result;
    result.detail = std::string("could not release the trial's ") + what + " (it is left allocated): " + error.describe();
    return result;
}

CUmemAllocationProp allocation_props(CUmemLocationType type, int id, CUmemAllocationHandleType handles) {
    CUmemAllocationProp props{};
    props.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = type;
    props.location.id = id;
    props.requestedHandleTypes = handles;
    return props;
}

// cuMemCreate of one minimum granule with `props`, then, when `export_as` is
// not NONE, cuMemExportToShareableHandle to that type; released either way.
TrialResult try_create(CUmemAllocationProp props, CUmemAllocationHandleType export_as) {
    std::size_t granularity = 0;
    if (auto queried = call_driver(&DriverTable::cuMemGetAllocationGranularity_v10020, &granularity, &props,
                                   CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        !queried)
        return outcome_of(queried.error(), "cuMemGetAllocationGranularity");
    CUmemGenericAllocationHandle handle = 0;
    if (auto created = call_driver(&DriverTable::cuMemCreate_v10020, &handle, granularity, &props, 0ULL); !created)
        return outcome_of(created.error(), "cuMemCreate");
    TrialResult result = works();
    if (export_as != CU_MEM_HANDLE_TYPE_NONE) {
        // Large enough for every handle type: an fd, a Win32 HANDLE, a 64-byte fabric handle.
        alignas(8) unsigned char exported[64] = {};
        auto done = call_driver(&DriverTable::cuMemExportToShareableHandle_v10020, static_cast<void*>(exported),
                                handle, export_as, 0ULL);
        if (!done) {
            result = outcome_of(done.error(), "cuMemExportToShareableHandle");
        } else if (export_as == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
#ifndef _WIN32
            int fd = -1;
            std::copy(exported, exported + sizeof fd, reinterpret_cast<unsigned char*>(&fd));
            if (fd >= 0) ::close(fd);
#endif
        }
    }
    if (auto released = call_driver(&DriverTable::cuMemRelease_v10020, handle); !released)
        return not_released(released.error(), "physical memory");
    return result;
}

TrialResult try_pool_of(const CUmemPoolProps& props, bool export_it);

TrialResult try_pool(CUmemAllocationHandleType handles, bool export_it, int device) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = handles;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    return try_pool_of(props, export_it);
}

// cuMemPoolCreate of a pool that cannot be shared at `type` / `id`, of
// allocation type `allocation`, destroyed again.
TrialResult try_located_pool(CUmemAllocationType allocation, CUmemLocationType type, int id) {
    CUmemPoolProps props{};
    props.allocType = allocation;
    props.location.type = type;
    props.location.id = id;
    return try_pool_of(props, false);
}

TrialResult try_pool_of(const CUmemPoolProps& props, bool export_it) {
    CUmemoryPool pool = nullptr;
    if (auto created = call_driver(&DriverTable::cuMemPoolCreate_v11020, &pool, &props); !created)
        return outcome_of(created.error(), "cuMemPoolCreate");
    TrialResult result = works();
    if (export_it) {
#ifndef _WIN32
        int fd = -1;
        auto done = call_driver(&DriverTable::cuMemPoolExportToShareableHandle_v11020, static_cast<void*>(&fd), pool,
                                props.handleTypes, 0ULL);
        if (!done)
            result = outcome_of(done.error(), "cuMemPoolExportToShareableHandle");
        else if (fd >= 0)
            ::close(fd);
#endif
    }
    if (auto destroyed = call_driver(&DriverTable::cuMemPoolDestroy_v11020, pool); !destroyed)
        return not_released(destroyed.error(), "memory pool");
    return result;
}

TrialResult trial_vmm(const Device& device, CapabilityFingerprint&) {
    return try_create(allocation_props(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), CU_MEM_HANDLE_TYPE_NONE),
                      CU_MEM_HANDLE_TYPE_NONE);
}

TrialResult trial_vmm_posix_fd(const Device& device, CapabilityFingerprint&) {
#ifdef _WIN32
    (void)device;
    return skipped("POSIX file descriptors are not Windows handles");
#else
    return try_create(
        allocation_props(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
#endif
}

TrialResult trial_vmm_win32(const Device& device, CapabilityFingerprint&) {
#ifdef _WIN32
    // No export: an exported NT handle would need closing with the Win32 API,
    // and creation is what differs between nodes.
    return try_create(allocation_props(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), CU_MEM_HANDLE_TYPE_WIN32),
                      CU_MEM_HANDLE_TYPE_NONE);
#else
    (void)device;
    return skipped("Win32 handles exist only on Windows");
#endif
}

TrialResult trial_vmm_fabric(const Device& device, CapabilityFingerprint&) {
    return try_create(allocation_props(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), CU_MEM_HANDLE_TYPE_FABRIC),
                      CU_MEM_HANDLE_TYPE_NONE);
}

TrialResult trial_fabric_export(const Device& device, CapabilityFingerprint&) {
    return try_create(allocation_props(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal(), CU_MEM_HANDLE_TYPE_FABRIC),
                      CU_MEM_HANDLE_TYPE_FABRIC);
}

TrialResult trial_host_vmm(const Device&, CapabilityFingerprint&) {
    return try_create(allocation_props(CU_MEM_LOCATION_TYPE_HOST, 0, CU_MEM_HANDLE_TYPE_NONE), CU_MEM_HANDLE_TYPE_NONE);
}

TrialResult trial_host_numa_vmm(const Device& device, CapabilityFingerprint&) {
    // The node the driver itself names as nearest: a node id that is valid on
    // this machine, so a refusal is the capability's, not the argument's.
    auto node = device.attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
    if (!node) return outcome_of(node.error(), "HOST_NUMA_ID");
    if (*node < 0) return skipped("the driver knows no host NUMA node for this device (HOST_NUMA_ID is -1)");
    return try_create(allocation_props(CU_MEM_LOCATION_TYPE_HOST_NUMA, *node, CU_MEM_HANDLE_TYPE_NONE),
                      CU_MEM_HANDLE_TYPE_NONE);
}

TrialResult trial_memory_pools(const Device& device, CapabilityFingerprint&) {
    return try_pool(CU_MEM_HANDLE_TYPE_NONE, false, device.ordinal());
}

TrialResult trial_pool_posix_fd(const Device& device, CapabilityFingerprint&) {
#ifdef _WIN32
    (void)device;
    return skipped("POSIX file descriptors are not Windows handles");
#else
    return try_pool(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, true, device.ordinal());
#endif
}

TrialResult trial_pool_fabric(const Device& device, CapabilityFingerprint&) {
    // Created and destroyed, never exported: driver 580 crashes in
    // cuMemPoolDestroy after it refused a fabric export of the pool
    // (fabric_export above is the export trial).
    return try_pool(CU_MEM_HANDLE_TYPE_FABRIC, false, device.ordinal());
}

TrialResult trial_host_pool(const Device&, CapabilityFingerprint&) {
    return try_located_pool(CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_LOCATION_TYPE_HOST, 0);
}

TrialResult trial_host_numa_pool(const Device& device, CapabilityFingerprint&) {
    // The device's nearest node, as for host_numa_vmm.
    auto node = device.attribute(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
    if (!node) return outcome_of(node.error(), "HOST_NUMA_ID");
    if (*node < 0) return skipped("the driver knows no host NUMA node for this device (HOST_NUMA_ID is -1)");
    return try_located_pool(CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_LOCATION_TYPE_HOST_NUMA, *node);
}

TrialResult trial_managed_pool(const Device& device, CapabilityFingerprint&) {
    return try_located_pool(CU_MEM_ALLOCATION_TYPE_MANAGED, CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal());
}

TrialResult trial_dma_buf(const Device&, CapabilityFingerprint&) {
#ifdef _WIN32
    return skipped("dma-buf descriptors exist only on Linux");
#else
    // Asked first: without the entry, the allocation below would be for nothing.
    if (auto present = detail::require_entry(&DriverTable::cuMemGetHandleForAddressRange_v11070); !present)
        return outcome_of(present.error(), "cuMemGetHandleForAddressRange");
    // One host page, aligned as dma-buf requires, inside an allocation of
    // two: the driver packs small allocations, so where earlier ones in the
    // process left off decides the start of a fresh one (driver 580 put a
    // 4 KiB allocation at 512 bytes past a page), and the verdict must not
    // depend on what the process did before.
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    CUdeviceptr memory = 0;
    if (auto allocated = call_driver(&DriverTable::cuMemAlloc_v3020, &memory, 2 * page); !allocated)
        return outcome_of(allocated.error(), "cuMemAlloc");
    const CUdeviceptr aligned = (memory + page - 1) / page * page;
    TrialResult result = works();
    int fd = -1;
    auto done = call_driver(&DriverTable::cuMemGetHandleForAddressRange_v11070, static_cast<void*>(&fd), aligned, page,
                            CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0ULL);
    if (!done)
        result = outcome_of(done.error(), "cuMemGetHandleForAddressRange");
    else if (fd >= 0)
        ::close(fd);
    if (auto freed = call_driver(&DriverTable::cuMemFree_v3020, memory); !freed)
        return not_released(freed.error(), "device memory");
    return result;
#endif
}

// PTX ISA versions, newest first; a driver's JIT takes every version up to the
// one of its CUDA release (13.0: 9.0, 12.8: 8.7, 11.8: 7.8, 10.1: 6.4). The
// list reaches past today's newest so a newer driver is credited.
constexpr int kPtxIsaCandidates[] = {99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 88, 87, 86, 85, 84, 83, 82, 81, 80,
                                     78, 77, 76, 75, 74, 73, 72, 71, 70, 65, 64, 63, 62, 61, 60};

TrialResult trial_ptx_jit(const Device& device, CapabilityFingerprint& fingerprint) {
    auto cc = device.compute_capability();
    if (!cc) return outcome_of(cc.error(), "compute capability");
    TrialResult last = skipped("no PTX version was tried");
    for (const int isa : kPtxIsaCandidates) {
        // An empty kernel for the device's own architecture: every PTX version
        // at or after the device's launch knows its target, so the first one
        // that loads is the newest the JIT accepts.
        char ptx[160];
        std::snprintf(ptx, sizeof ptx,
                      ".version %d.%d\n.target sm_%d%d\n.address_size 64\n.visible .entry cudyn_trial()\n{\n ret;\n}\n",
                      isa / 10, isa % 10, cc->major, cc->minor);
        CUmodule module = nullptr;
        auto loaded = call_driver(&DriverTable::cuModuleLoadData_v2000, &module, static_cast<const void*>(ptx));
        if (!loaded) {
            last = outcome_of(loaded.error(), "cuModuleLoadData");
            // Only a refused version is worth trying older; anything else (no
            // JIT at all, out of memory) answers the same for every version.
            if (last.outcome != TrialOutcome::Refused || loaded.error().driver_result == CUDA_SUCCESS) return last;
            continue;
        }
        if (auto unloaded = call_driver(&DriverTable::cuModuleUnload_v2000, module); !unloaded)
            return not_released(unloaded.error(), "module");
        fingerprint.newest_ptx_isa = isa;
        return works();
    }
    return last;
}

TrialResult trial_checkpoint(const Device&, CapabilityFingerprint&) {
    // Asking about this process changes nothing; a driver that can
    // checkpoint processes answers that it is running.
    CUprocessState state = CU_PROCESS_STATE_FAILED;
    const int pid = static_cast<int>(detail::this_process().pid);
    if (auto asked = call_driver(&DriverTable::cuCheckpointProcessGetState_v12080, pid, &state); !asked)
        return outcome_of(asked.error(), "cuCheckpointProcessGetState");
    if (state == CU_PROCESS_STATE_RUNNING) return works();
    return TrialResult{TrialOutcome::Failed, CUDA_SUCCESS,
                       "this process reads as state " + std::to_string(static_cast<int>(state)) + ", not running", 0};
}

using TrialFunction = TrialResult (*)(const Device&, CapabilityFingerprint&);
struct TrialRow {
    TrialResult CapabilityFingerprint::*field;
    TrialFunction run;
};
constexpr TrialRow kTrials[] = {
#define CUDYN_CAPABILITY_TRIAL(field, description) {&CapabilityFingerprint::field, &trial_##field},
#include "cudyn/device/capability_trials.def"
#undef CUDYN_CAPABILITY_TRIAL
};

// What the worker thread and the caller share: the caller may stop waiting
// and leave, so the worker owns a reference and writes only here.
struct TrialProgress {
    std::mutex mutex;
    std::condition_variable changed;
    CapabilityFingerprint fingerprint;
    std::size_t finished = 0;  // trials done, in kTrials order
    bool abandoned = false;    // the caller gave up waiting: run nothing more
    // The device's primary context, retained for as long as either side may
    // use it: a worker left behind in a driver call still has its context.
    detail::OwnerContext context;
};

void run_trials(const std::shared_ptr<TrialProgress>& progress, Device device) {
    detail::ContextScope scope(progress->context);
    for (std::size_t i = 0; i < std::size(kTrials); ++i) {
        TrialResult result;
        CapabilityFingerprint scratch;  // trials write extra facts (newest_ptx_isa) here
        {
            std::lock_guard<std::mutex> lock(progress->mutex);
            if (progress->abandoned) return;
            scratch = progress->fingerprint;
        }
        if (!scope.status()) {
            result = outcome_of(scope.status().error(), "making the primary context current");
            result.outcome = TrialOutcome::Failed;
        } else {
            const auto start = std::chrono::steady_clock::now();
            result = kTrials[i].run(device, scratch);
            result.milliseconds =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        }
        std::lock_guard<std::mutex> lock(progress->mutex);
        if (progress->abandoned) return;
        scratch.*kTrials[i].field = std::move(result);
        progress->fingerprint = std::move(scratch);
        progress->finished = i + 1;
        progress->changed.notify_all();
    }
}

}  // namespace

Result<CapabilityFingerprint> fingerprint_device(const Device& device, const FingerprintOptions& options) {
    constexpr detail::Operation kFingerprint{"fingerprint_device"};
    if (options.trial_timeout.count() <= 0)
        return kFingerprint.invalid("trial_timeout must be positive, got " +
                                    std::to_string(options.trial_timeout.count()) + " ms");
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::retain_primary(device.handle()));

    auto progress = std::make_shared<TrialProgress>();
    progress->fingerprint.device = device.ordinal();
    progress->context = std::move(context);
    std::thread worker;
    try {
        worker = std::thread(run_trials, progress, device);
    } catch (const std::system_error& error) {
        return kFingerprint.context(Error::system("std::thread", error.code().value(), "could not start the trials"));
    }
    // Each trial gets its own time: the deadline moves on whenever one finishes.
    // The deadline is on the system clock: a wait on the steady clock makes
    // libstdc++ call pthread_cond_clockwait, which needs glibc 2.30, above the
    // 2.28 the portable release promises. A system clock set back while a
    // trial runs only lengthens that trial's bound.
    std::unique_lock<std::mutex> lock(progress->mutex);
    std::size_t seen = 0;
    while (seen < std::size(kTrials)) {
        const auto deadline = std::chrono::system_clock::now() + options.trial_timeout;
        const bool moved = progress->changed.wait_until(lock, deadline, [&] { return progress->finished > seen; });
        if (!moved) break;
        seen = progress->finished;
    }
    CapabilityFingerprint fingerprint = progress->fingerprint;
    if (seen == std::size(kTrials)) {
        // Every trial returned: the worker is about to end. Joined, so that
        // the context retain it shares goes here, with its answer.
        lock.unlock();
        worker.join();
        CUDYN_TRY(progress->context.release());
        return fingerprint;
    }
    progress->abandoned = true;
    TrialResult& stuck = fingerprint.*kTrials[seen].field;
    stuck.outcome = TrialOutcome::TimedOut;
    stuck.detail = "no answer within " + std::to_string(options.trial_timeout.count()) + " ms";
    stuck.milliseconds = static_cast<double>(options.trial_timeout.count());
    for (std::size_t i = seen + 1; i < std::size(kTrials); ++i)
        fingerprint.*kTrials[i].field = skipped("an earlier trial did not return in time");
    // Left to finish on its own: it holds the context until it does.
    worker.detach();
    return fingerprint;
}

}  // namespace cudyn
