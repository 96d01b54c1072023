// cudyn-bench — memory cases: cudyn's buffers, zero-copy, managed prefetch
// and prefetch plans against the same driver entries called raw (the table's
// function pointers, none of cudyn's checks, Results or RAII), in the same
// run. Kernels are the PTX ones of tests/support/ptx_kernels.hpp; samples
// alternate which side runs first, the first pair a warm-up.
#include "harness.hpp"
#include "pool_pairs.hpp"

#include "../tests/support/ptx_kernels.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/memory/managed_range.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::bench {

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

// Device 0's primary context, a stream and the kernels, kept for the whole
// run (releasing the primary context between cases would tear it down).
struct MemoryFixture {
    Device device;
    PrimaryContext context;
    Stream stream;
    DeviceCapabilities caps;
    std::optional<cudyn_test::PtxKernels> kernels;  // empty where the module did not load
    std::string kernel_error;                        // why
};

Result<MemoryFixture> make_fixture() {
    auto device = Device::get(0);
    if (!device) return device.error();
    auto context = PrimaryContext::activate(*device);
    if (!context) return context.error();
    auto stream = Stream::create();
    if (!stream) return stream.error();
    auto caps = probe_capabilities(*device);
    if (!caps) return caps.error();
    MemoryFixture made{*device, std::move(*context), std::move(*stream), *caps, std::nullopt, {}};
    auto kernels = cudyn_test::PtxKernels::load();
    if (kernels) made.kernels.emplace(std::move(*kernels));
    else made.kernel_error = "the PTX kernels did not load: " + kernels.error().describe();
    return made;
}

const MemoryFixture* fixture(std::string& error) {
    static std::optional<Result<MemoryFixture>> made;
    if (!made) made.emplace(make_fixture());
    if (!made->has_value()) {
        error = made->error().describe();
        return nullptr;
    }
    return &made->value();
}

// One timed sample of one side: a value in the case's unit, or why it failed.
using Sample = std::function<Result<double>()>;

// `samples` counted pairs after one warm-up pair, alternating which side goes
// first. The case's raw/cudyn are the medians.
CaseResult compare_samples(int samples, const Sample& raw, const Sample& cudyn) {
    CaseResult result;
    for (int pair = 0; pair <= samples; ++pair) {
        Result<double> raw_value = 0.0;
        Result<double> cudyn_value = 0.0;
        if (pair % 2 == 0) {
            raw_value = raw();
            cudyn_value = cudyn();
        } else {
            cudyn_value = cudyn();
            raw_value = raw();
        }
        if (!raw_value) return failed("raw side: " + raw_value.error().describe());
        if (!cudyn_value) return failed("cudyn side: " + cudyn_value.error().describe());
        if (pair == 0) continue;
        result.raw_samples.push_back(*raw_value);
        result.cudyn_samples.push_back(*cudyn_value);
    }
    result.raw = median(result.raw_samples);
    result.cudyn = median(result.cudyn_samples);
    result.samples = samples;
    result.statistic = "median";
    return result;
}

// Runs `work` and waits for the device; milliseconds of both.
template <typename Work>
Result<double> timed_ms(Work work) {
    const auto start = Clock::now();
    CUDYN_TRY(work());
    CUDYN_TRY(call_driver(&DriverTable::cuCtxSynchronize_v2000));
    return elapsed_ms(start, Clock::now());
}

Result<void> raw_result(CUresult rc, const char* entry) {
    if (rc != CUDA_SUCCESS) return Error::from_driver(rc, entry);
    return ok();
}

// =============================================================================
// 1. Allocation: DeviceBuffer vs cuMemAlloc_v2 + cuMemFree_v2
// =============================================================================

CaseResult alloc_free(const Settings& settings, std::size_t bytes, std::uint64_t default_iterations) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    auto info = current_device_memory_info();
    if (!info) return failed(info.error().describe());
    if (info->free_bytes < 2 * bytes)
        return skipped("device 0 has less than twice " + std::to_string(bytes) + " bytes free");

    const std::uint64_t iterations = settings.value_or_iterations(default_iterations);
    const DriverTable& cu = driver();
    const Sample raw = [&]() -> Result<double> {
        const auto start = Clock::now();
        for (std::uint64_t i = 0; i < iterations; ++i) {
            CUdeviceptr pointer = 0;
            CUDYN_TRY(raw_result(cu.cuMemAlloc_v3020(&pointer, bytes), "cuMemAlloc_v2"));
            keep(pointer);
            CUDYN_TRY(raw_result(cu.cuMemFree_v3020(pointer), "cuMemFree_v2"));
        }
        return elapsed_ns(start, Clock::now()) / 1000.0 / static_cast<double>(iterations);
    };
    const Sample wrapped = [&]() -> Result<double> {
        const auto start = Clock::now();
        for (std::uint64_t i = 0; i < iterations; ++i) {
            auto buffer = DeviceBuffer<std::byte>::allocate(bytes);
            if (!buffer) return buffer.error();
            keep(buffer->device_address());
        }  // the destructor frees, as programs use it
        return elapsed_ns(start, Clock::now()) / 1000.0 / static_cast<double>(iterations);
    };
    CaseResult result = compare_samples(settings.value_or_repetitions(11), raw, wrapped);
    if (result.status != Status::Ok) return result;
    result.operation = "alloc+free " + std::to_string(bytes / kMiB) + " MiB";
    result.unit = "us/op";
    result.iterations = iterations;
    add_target_note(result, "alloc+free", 1.02, false);
    return result;
}

const CaseRegistrar alloc_1m({"memory/alloc-free-1MiB",
                              "DeviceBuffer<std::byte> of 1 MiB vs raw cuMemAlloc_v2+cuMemFree_v2", true,
                              [](const Settings& s) { return alloc_free(s, kMiB, 200); }});
const CaseRegistrar alloc_64m({"memory/alloc-free-64MiB",
                               "DeviceBuffer<std::byte> of 64 MiB vs raw cuMemAlloc_v2+cuMemFree_v2", true,
                               [](const Settings& s) { return alloc_free(s, 64 * kMiB, 50); }});
const CaseRegistrar alloc_1g({"memory/alloc-free-1GiB",
                              "DeviceBuffer<std::byte> of 1 GiB vs raw cuMemAlloc_v2+cuMemFree_v2", true,
                              [](const Settings& s) { return alloc_free(s, kGiB, 10); }});

// =============================================================================
// 2. Zero-copy: a kernel reading a ZeroCopyBuffer vs a pinned cuMemcpyHtoD
// =============================================================================

// Frees raw cuMemHostAlloc / cuMemAlloc memory at scope exit (the raw side
// has no RAII of its own; this keeps a failed sample from leaking).
struct RawHost {
    void* pointer = nullptr;
    ~RawHost() {
        if (pointer != nullptr) (void)driver().cuMemFreeHost_v2000(pointer);
    }
};
struct RawDevice {
    CUdeviceptr pointer = 0;
    ~RawDevice() {
        if (pointer != 0) (void)driver().cuMemFree_v3020(pointer);
    }
};

double gigabytes_per_second(std::size_t bytes, double ms) { return static_cast<double>(bytes) / (ms * 1e6); }

CaseResult zero_copy_read(const Settings& settings) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    if (!f->caps.can_map_host_memory) return skipped("device 0 cannot map host memory (CAN_MAP_HOST_MEMORY is 0)");
    if (!f->kernels) return skipped(f->kernel_error);
    constexpr std::size_t kBytes = 512 * kMiB;
    constexpr std::size_t kCount = kBytes / sizeof(std::uint32_t);
    const DriverTable& cu = driver();

    // Raw: pinned host memory copied to device memory with cuMemcpyHtoD_v2.
    RawHost pinned;
    RawDevice target;
    if (CUresult rc = cu.cuMemHostAlloc_v2020(&pinned.pointer, kBytes, 0); rc != CUDA_SUCCESS)
        return failed(Error::from_driver(rc, "cuMemHostAlloc").describe());
    std::memset(pinned.pointer, 1, kBytes);
    if (CUresult rc = cu.cuMemAlloc_v3020(&target.pointer, kBytes); rc != CUDA_SUCCESS)
        return failed(Error::from_driver(rc, "cuMemAlloc_v2").describe());
    // cudyn: the same kernel that reads device memory reads the ZeroCopyBuffer over the bus.
    auto mapped = ZeroCopyBuffer<std::uint32_t>::allocate(kCount);
    if (!mapped) return failed(mapped.error().describe());
    std::memset(mapped->data(), 1, kBytes);
    auto counter = DeviceBuffer<std::uint32_t>::allocate(1);
    if (!counter) return failed(counter.error().describe());

    const Sample raw = [&]() -> Result<double> {
        auto ms = timed_ms([&] {
            return raw_result(cu.cuMemcpyHtoD_v3020(target.pointer, pinned.pointer, kBytes), "cuMemcpyHtoD_v2");
        });
        if (!ms) return ms.error();
        return gigabytes_per_second(kBytes, *ms);
    };
    const auto kernel_read = [&](CUdeviceptr data) -> Result<double> {
        CUDYN_TRY(counter->fill(0u));
        auto ms = timed_ms([&] { return f->kernels->sum_u32(data, kCount, counter->device_address()); });
        if (!ms) return ms.error();
        std::uint32_t sum = 0;
        CUDYN_TRY(counter->copy_to(HostSpan<std::uint32_t>(&sum, 1)));
        if (sum != static_cast<std::uint32_t>(0x01010101ull * kCount))
            return Error::invalid_argument("sum_u32 read a wrong sum: " + std::to_string(sum));
        return gigabytes_per_second(kBytes, *ms);
    };
    const Sample zero_copy = [&]() { return kernel_read(mapped->device_address()); };
    CaseResult result = compare_samples(settings.value_or_repetitions(7), raw, zero_copy);
    if (result.status != Status::Ok) return result;

    // For scale: the same kernel on device memory (the pinned copy's target).
    std::vector<double> device_samples;
    for (int i = 0; i < 5; ++i) {
        auto gbps = kernel_read(target.pointer);
        if (!gbps) return failed("device-memory read: " + gbps.error().describe());
        device_samples.push_back(*gbps);
    }
    result.operation = "read 512 MiB: kernel on ZeroCopyBuffer vs pinned cuMemcpyHtoD";
    result.unit = "GB/s";
    result.iterations = 1;
    result.extra = {{"device_memory_kernel_GBps", median(device_samples)}};
    result.notes.push_back("raw = pinned cuMemcpyHtoD_v2 bandwidth, cudyn = sum_u32 kernel reading the ZeroCopyBuffer "
                           "(higher is better); the same kernel reads device memory at " +
                           format("%.0f", median(device_samples)) + " GB/s");
    add_target_note(result, "zero-copy kernel read vs pinned memcpy", 0.90, true);
    return result;
}

const CaseRegistrar zero_copy_case({"memory/zero-copy-read",
                                    "kernel read bandwidth of a 512 MiB ZeroCopyBuffer vs a pinned cuMemcpyHtoD_v2 of "
                                    "the same size (and device memory for scale)",
                                    true, zero_copy_read});

// =============================================================================
// 3. Managed memory: prefetch_to vs raw cuMemPrefetchAsync_v2, fault-driven read
// =============================================================================

// The managed test size: 4 GiB where at least 8 GiB are free, else half of
// what is free; a multiple of 64 x 2 MiB so the plan's ranges are whole
// large pages.
std::size_t managed_bytes() {
    auto info = current_device_memory_info();
    if (!info) return 0;
    constexpr std::size_t kStep = 64 * 2 * kMiB;
    const std::size_t wanted = info->free_bytes >= 8 * kGiB ? 4 * kGiB : info->free_bytes / 2;
    return wanted / kStep * kStep;
}

struct ManagedSetup {
    ManagedBuffer<std::uint32_t> buffer;
    ManagedRange hints;
    CUmemLocation device_location;
    CUmemLocation host_location;
};

std::optional<ManagedSetup> managed_setup(const MemoryFixture& f, std::string& why, bool& skip) {
    skip = true;
    if (!f.caps.concurrent_managed_access) {
        why = "device 0 lacks CONCURRENT_MANAGED_ACCESS: managed memory cannot be prefetched to it";
        return std::nullopt;
    }
    if (!has_entry(&DriverTable::cuMemPrefetchAsync_v12020)) {
        why = "the driver lacks cuMemPrefetchAsync_v2 (12.2+), the raw baseline";
        return std::nullopt;
    }
    const std::size_t bytes = managed_bytes();
    if (bytes == 0) {
        why = "too little free device memory for a managed test buffer";
        return std::nullopt;
    }
    skip = false;
    auto buffer = ManagedBuffer<std::uint32_t>::allocate(bytes / sizeof(std::uint32_t));
    if (!buffer) {
        why = buffer.error().describe();
        return std::nullopt;
    }
    std::memset(buffer->data(), 1, bytes);  // resident on the host to start with
    auto hints = buffer->managed_range();
    if (!hints) {
        why = hints.error().describe();
        return std::nullopt;
    }
    return ManagedSetup{std::move(*buffer), *hints, Location::device(0).to_cu(), Location::host().to_cu()};
}

// Moves the whole buffer back to the host, untimed, before a sample.
Result<void> reset_to_host(const ManagedSetup& m, CUstream stream) {
    const CUresult rc = driver().cuMemPrefetchAsync_v12020(m.hints.device_address(), m.hints.size_bytes(), m.host_location, 0, stream);
    CUDYN_TRY(raw_result(rc, "cuMemPrefetchAsync_v2"));
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, stream);
}

// Moves the buffer back to the host (untimed), then times `work` until the
// device is done with it.
template <typename Work>
Result<double> timed_from_host(const ManagedSetup& m, CUstream stream, Work work) {
    CUDYN_TRY(reset_to_host(m, stream));
    return timed_ms(work);
}

// The fixture and a host-resident managed buffer, or why the case cannot run.
struct ManagedCase {
    const MemoryFixture* fixture = nullptr;
    std::optional<ManagedSetup> managed;
    CaseResult problem;
};

ManagedCase open_managed_case() {
    ManagedCase opened;
    std::string error;
    opened.fixture = fixture(error);
    if (opened.fixture == nullptr) {
        opened.problem = skipped(error);
        return opened;
    }
    bool skip = false;
    opened.managed = managed_setup(*opened.fixture, error, skip);
    if (!opened.managed) opened.problem = skip ? skipped(error) : failed(error);
    return opened;
}

CaseResult managed_prefetch(const Settings& settings) {
    ManagedCase opened = open_managed_case();
    if (!opened.managed) return opened.problem;
    const MemoryFixture* f = opened.fixture;
    ManagedSetup* m = &*opened.managed;
    const CUstream stream = f->stream.handle();
    const std::size_t bytes = m->hints.size_bytes();
    const DriverTable& cu = driver();

    const auto after_reset = [&](auto work) { return timed_from_host(*m, stream, work); };
    const Sample raw = [&]() {
        return after_reset([&] {
            return raw_result(cu.cuMemPrefetchAsync_v12020(m->hints.device_address(), bytes, m->device_location, 0, stream),
                              "cuMemPrefetchAsync_v2");
        });
    };
    const Sample wrapped = [&]() {
        return after_reset([&] { return m->hints.prefetch_to(Location::device(0), f->stream); });
    };
    CaseResult result = compare_samples(settings.value_or_repetitions(5), raw, wrapped);
    if (result.status != Status::Ok) return result;

    result.operation = "prefetch " + std::to_string(bytes / kMiB) + " MiB managed host->device";
    result.unit = "ms";
    result.iterations = 1;
    add_target_note(result, "prefetch_to vs raw cuMemPrefetchAsync_v2", 1.02, false);
    if (!f->kernels) {
        result.notes.push_back("fault-driven read not measured: " + f->kernel_error);
        return result;
    }

    // The reason to prefetch: a kernel reading host-resident managed memory
    // faults its pages over, against prefetch_to first and then the read.
    auto counter = DeviceBuffer<std::uint32_t>::allocate(1);
    if (!counter) return failed(counter.error().describe());
    const std::size_t count = bytes / sizeof(std::uint32_t);
    const auto read = [&] { return f->kernels->sum_u32(m->hints.device_address(), count, counter->device_address()); };
    std::vector<double> fault_driven, prefetched;
    for (int i = 0; i < 3; ++i) {
        auto faulted = after_reset(read);
        if (!faulted) return failed("fault-driven read: " + faulted.error().describe());
        fault_driven.push_back(*faulted);
        auto both = after_reset([&]() -> Result<void> {
            CUDYN_TRY(m->hints.prefetch_to(Location::device(0), f->stream));
            return read();
        });
        if (!both) return failed("prefetch + read: " + both.error().describe());
        prefetched.push_back(*both);
    }
    result.extra = {{"fault_driven_kernel_read_ms", median(fault_driven)},
                    {"prefetch_to_then_kernel_read_ms", median(prefetched)}};
    result.notes.push_back("kernel read of host-resident managed memory: fault-driven " +
                           format("%.1f", median(fault_driven)) + " ms, prefetch_to + read " +
                           format("%.1f", median(prefetched)) + " ms");
    return result;
}

const CaseRegistrar managed_prefetch_case({"memory/managed-prefetch",
                                           "4 GiB managed (less if < 8 GiB free) to device 0: "
                                           "ManagedRange::prefetch_to vs raw cuMemPrefetchAsync_v2; "
                                           "fault-driven kernel read vs prefetch_to + read",
                                           true, managed_prefetch});

// Advice is a host-side bookkeeping call (no migration): per call, cudyn's
// location checks (the device's CONCURRENT_MANAGED_ACCESS among them) are
// what could show. Set and unset a preferred location on 2 MiB, in turn.
CaseResult managed_advise(const Settings& settings) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    if (!f->caps.concurrent_managed_access)
        return skipped("device 0 lacks CONCURRENT_MANAGED_ACCESS: no preferred location on it");
    if (!has_entry(&DriverTable::cuMemAdvise_v12020)) return skipped("the driver lacks cuMemAdvise_v2 (12.2+)");
    auto buffer = ManagedBuffer<std::uint32_t>::allocate(2 * kMiB / sizeof(std::uint32_t));
    if (!buffer) return failed(buffer.error().describe());
    auto hints = buffer->managed_range();
    if (!hints) return failed(hints.error().describe());
    const CUmemLocation device0 = Location::device(0).to_cu();
    const CUmemLocation host = Location::host().to_cu();
    const DriverTable& cu = driver();
    const auto raw_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            const CUresult rc = i % 2 == 0 ? cu.cuMemAdvise_v12020(hints->device_address(), hints->size_bytes(),
                                                                   CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device0)
                                           : cu.cuMemAdvise_v12020(hints->device_address(), hints->size_bytes(),
                                                                   CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, host);
            wrong += rc == CUDA_SUCCESS ? 0 : 1;
        }
        return wrong;
    };
    const auto cudyn_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            const auto done = i % 2 == 0 ? hints->set_preferred_location(Location::device(0))
                                         : hints->unset_preferred_location();
            wrong += done.has_value() ? 0 : 1;
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 20000, raw_loop, cudyn_loop);
    if (result.status != Status::Ok) return result;
    result.operation = "set/unset preferred location on 2 MiB managed vs cuMemAdvise_v2";
    result.unit = "ns/call";
    add_target_note(result, "advice", 1.05, false);
    return result;
}

const CaseRegistrar managed_advise_case({"memory/managed-advise",
                                         "ManagedRange::set/unset_preferred_location on 2 MiB vs raw "
                                         "cuMemAdvise_v2, per call",
                                         true, managed_advise});

// Discarding before a prefetch lets the driver skip migrating contents the
// program will overwrite: one cuMemDiscardAndPrefetchBatchAsync through a
// PrefetchPlan against a raw cuMemDiscardBatchAsync followed by a raw
// cuMemPrefetchBatchAsync, both over 64 ranges of the managed buffer, host-
// resident before each sample. A ratio below 1 is the single call's gain.
CaseResult discard_and_prefetch(const Settings& settings) {
    if (!has_entry(&DriverTable::cuMemDiscardAndPrefetchBatchAsync_v13000) ||
        !has_entry(&DriverTable::cuMemDiscardBatchAsync_v13000) || !has_entry(&DriverTable::cuMemPrefetchBatchAsync_v13000))
        return skipped("the driver lacks the 13.0 discard and prefetch batches");
    ManagedCase opened = open_managed_case();
    if (!opened.managed) return opened.problem;
    const MemoryFixture* f = opened.fixture;
    ManagedSetup* m = &*opened.managed;
    const CUstream stream = f->stream.handle();
    constexpr std::size_t kRanges = 64;
    const std::size_t piece = m->hints.size_bytes() / kRanges;
    std::vector<CUdeviceptr> pointers;
    std::vector<std::size_t> sizes(kRanges, piece);
    PrefetchPlan plan;
    for (std::size_t i = 0; i < kRanges; ++i) {
        pointers.push_back(m->hints.device_address() + i * piece);
        auto range = m->hints.subrange(i * piece, piece);
        if (!range) return failed(range.error().describe());
        if (auto added = plan.add_discard_and_prefetch(*range, Location::device(0)); !added)
            return failed(added.error().describe());
    }
    CUmemLocation device0 = m->device_location;
    std::size_t first = 0;
    const DriverTable& cu = driver();
    const auto after_reset = [&](auto work) { return timed_from_host(*m, stream, work); };
    const Sample raw = [&]() {
        return after_reset([&]() -> Result<void> {
            CUDYN_TRY(raw_result(cu.cuMemDiscardBatchAsync_v13000(pointers.data(), sizes.data(), kRanges, 0, stream),
                                 "cuMemDiscardBatchAsync"));
            return raw_result(cu.cuMemPrefetchBatchAsync_v13000(pointers.data(), sizes.data(), kRanges, &device0,
                                                                 &first, 1, 0, stream),
                              "cuMemPrefetchBatchAsync");
        });
    };
    const Sample wrapped = [&]() { return after_reset([&] { return plan.execute(f->stream); }); };
    CaseResult result = compare_samples(settings.value_or_repetitions(5), raw, wrapped);
    if (result.status != Status::Ok) return result;
    result.operation = "discard + prefetch " + std::to_string(m->hints.size_bytes() / kMiB) +
                       " MiB managed host->device in 64 ranges: PrefetchPlan discard-and-prefetch (one call) vs raw "
                       "cuMemDiscardBatchAsync + cuMemPrefetchBatchAsync";
    result.unit = "ms";
    result.iterations = 1;
    return result;
}

const CaseRegistrar discard_and_prefetch_case({"memory/discard-and-prefetch",
                                               "4 GiB managed (less if < 8 GiB free) in 64 ranges to device 0: "
                                               "PrefetchPlan::add_discard_and_prefetch vs raw discard batch + "
                                               "prefetch batch",
                                               true, discard_and_prefetch});

// =============================================================================
// 4. PrefetchPlan of 64 ranges vs one raw batch call vs 64 raw calls
// =============================================================================

CaseResult prefetch_plan(const Settings& settings) {
    constexpr std::size_t kRanges = 64;
    ManagedCase opened = open_managed_case();
    if (!opened.managed) return opened.problem;
    const MemoryFixture* f = opened.fixture;
    ManagedSetup* m = &*opened.managed;
    const CUstream stream = f->stream.handle();
    const std::size_t part = m->hints.size_bytes() / kRanges;
    const DriverTable& cu = driver();

    PrefetchPlan plan;
    std::vector<CUdeviceptr> pointers;
    std::vector<std::size_t> sizes(kRanges, part);
    for (std::size_t i = 0; i < kRanges; ++i) {
        auto range = m->hints.subrange(i * part, part);
        if (!range) return failed(range.error().describe());
        if (auto added = plan.add(*range, Location::device(0)); !added) return failed(added.error().describe());
        pointers.push_back(range->device_address());
    }
    const auto after_reset = [&](auto work) { return timed_from_host(*m, stream, work); };
    const auto raw_calls = [&]() -> Result<void> {
        for (std::size_t i = 0; i < kRanges; ++i)
            CUDYN_TRY(raw_result(cu.cuMemPrefetchAsync_v12020(pointers[i], part, m->device_location, 0, stream),
                                 "cuMemPrefetchAsync_v2"));
        return ok();
    };
    const bool has_batch = has_entry(&DriverTable::cuMemPrefetchBatchAsync_v13000);
    const auto raw_batch = [&]() -> Result<void> {
        CUmemLocation location = m->device_location;
        std::size_t first = 0;
        return raw_result(cu.cuMemPrefetchBatchAsync_v13000(pointers.data(), sizes.data(), kRanges, &location, &first,
                                                            1, 0, stream),
                          "cuMemPrefetchBatchAsync");
    };
    const Sample raw = [&]() { return has_batch ? after_reset(raw_batch) : after_reset(raw_calls); };
    const Sample wrapped = [&]() { return after_reset([&] { return plan.execute(f->stream); }); };
    CaseResult result = compare_samples(settings.value_or_repetitions(5), raw, wrapped);
    if (result.status != Status::Ok) return result;

    std::vector<double> separate;
    for (int i = 0; i < 3; ++i) {
        auto ms = after_reset(raw_calls);
        if (!ms) return failed("64 raw calls: " + ms.error().describe());
        separate.push_back(*ms);
    }
    result.operation = "prefetch 64 x " + std::to_string(part / kMiB) + " MiB managed to device 0";
    result.unit = "ms";
    result.iterations = 1;
    result.extra = {{"raw_64_calls_ms", median(separate)}};
    if (has_batch) {
        result.notes.push_back("raw = one cuMemPrefetchBatchAsync; 64 raw cuMemPrefetchAsync_v2 calls took " +
                               format("%.1f", median(separate)) + " ms");
        add_target_note(result, "PrefetchPlan vs raw batch", 1.05, false);
    } else {
        result.notes.push_back(
            "this driver has no cuMemPrefetchBatchAsync (13.0+): raw = 64 cuMemPrefetchAsync_v2 calls");
    }
    return result;
}

const CaseRegistrar prefetch_plan_case({"memory/prefetch-plan-64",
                                        "PrefetchPlan of 64 ranges vs one raw cuMemPrefetchBatchAsync (and 64 raw "
                                        "cuMemPrefetchAsync_v2 calls)",
                                        true, prefetch_plan});

// =============================================================================
// 5. DeviceSpan: small copies and fills, where its checks would show
// =============================================================================

// `iterations` operations of 4 KiB on one 4 KiB device buffer, then one
// stream synchronize: the per-call cost (checks, Result, the driver's enqueue)
// dominates, not the bytes. A loop counts its failed calls.
CaseResult span_small_op(const Settings& settings, bool fill) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    constexpr std::size_t kWords = 1024;
    auto buffer = DeviceBuffer<std::uint32_t>::allocate(kWords);
    if (!buffer) return failed(buffer.error().describe());
    auto pinned = PinnedBuffer<std::uint32_t>::allocate(kWords);
    if (!pinned) return failed(pinned.error().describe());
    const DeviceSpan<std::uint32_t> span = buffer->device_span();
    const CUstream stream = f->stream.handle();
    const DriverTable& cu = driver();
    const auto finish = [&](std::uint64_t wrong) {
        return wrong + (cu.cuStreamSynchronize_v2000(stream) == CUDA_SUCCESS ? 0 : 1);
    };
    const auto raw_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            const CUresult rc = fill ? cu.cuMemsetD32Async_v3020(span.device_address(), static_cast<unsigned>(i), kWords, stream)
                                     : cu.cuMemcpyHtoDAsync_v3020(span.device_address(), pinned->data(), kWords * 4, stream);
            wrong += rc == CUDA_SUCCESS ? 0 : 1;
        }
        return finish(wrong);
    };
    const auto cudyn_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            const auto done = fill ? span.fill(static_cast<std::uint32_t>(i), f->stream)
                                   : span.copy_from(pinned->span(), f->stream);
            wrong += done.has_value() ? 0 : 1;
        }
        return finish(wrong);
    };
    CaseResult result = compare_loops(settings, 20000, raw_loop, cudyn_loop);
    if (result.status != Status::Ok) return result;
    result.operation = fill ? "DeviceSpan::fill_async 4 KiB vs cuMemsetD32Async"
                            : "DeviceSpan::copy_from_async 4 KiB pinned vs cuMemcpyHtoDAsync_v2";
    result.unit = "ns/op";
    add_target_note(result, fill ? "span fill" : "span copy", 1.05, false);
    return result;
}

const CaseRegistrar span_fill_case({"memory/span-fill-4KiB",
                                    "DeviceSpan::fill_async of 4 KiB vs raw cuMemsetD32Async, enqueue rate", true,
                                    [](const Settings& s) { return span_small_op(s, true); }});
const CaseRegistrar span_copy_case({"memory/span-copy-4KiB",
                                    "DeviceSpan::copy_from_async of 4 KiB pinned vs raw cuMemcpyHtoDAsync_v2, "
                                    "enqueue rate",
                                    true, [](const Settings& s) { return span_small_op(s, false); }});

// =============================================================================
// 6. Synchronous forms: done when they return
// =============================================================================

// A synchronous 4 KiB fill or copy against the raw call followed by one
// cuStreamSynchronize(CU_STREAM_LEGACY): what "synchronous means done" must
// cost at most (the raw no-stream memset and device-to-device copy return
// before the device is done; the sync is what makes them done).
enum class SyncOp { Fill, CopyDeviceToDevice, CopyFromPageable };

CaseResult span_sync_op(const Settings& settings, SyncOp op) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    constexpr std::size_t kWords = 1024;
    auto buffer = DeviceBuffer<std::uint32_t>::allocate(2 * kWords);
    if (!buffer) return failed(buffer.error().describe());
    std::vector<std::uint32_t> pageable(kWords, 7u);
    const DeviceSpan<std::uint32_t> whole = buffer->device_span();
    const DeviceSpan<std::uint32_t> front = *whole.subspan(0, kWords);
    const DeviceSpan<std::uint32_t> back = *whole.subspan(kWords, kWords);
    const DriverTable& cu = driver();
    const auto raw_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            CUresult rc = CUDA_SUCCESS;
            switch (op) {
                case SyncOp::Fill: rc = cu.cuMemsetD32_v3020(front.device_address(), static_cast<unsigned>(i), kWords); break;
                case SyncOp::CopyDeviceToDevice: rc = cu.cuMemcpyDtoD_v3020(back.device_address(), front.device_address(), kWords * 4); break;
                case SyncOp::CopyFromPageable: rc = cu.cuMemcpyHtoD_v3020(front.device_address(), pageable.data(), kWords * 4); break;
            }
            if (rc == CUDA_SUCCESS) rc = cu.cuStreamSynchronize_v2000(CU_STREAM_LEGACY);
            wrong += rc == CUDA_SUCCESS ? 0 : 1;
        }
        return wrong;
    };
    const auto cudyn_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            Result<void> done = ok();
            switch (op) {
                case SyncOp::Fill: done = front.fill(static_cast<std::uint32_t>(i)); break;
                case SyncOp::CopyDeviceToDevice: done = back.copy_from(front); break;
                case SyncOp::CopyFromPageable: done = front.copy_from(pageable); break;
            }
            wrong += done.has_value() ? 0 : 1;
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 20000, raw_loop, cudyn_loop);
    if (result.status != Status::Ok) return result;
    switch (op) {
        case SyncOp::Fill:
            result.operation = "DeviceSpan::fill 4 KiB vs cuMemsetD32 + cuStreamSynchronize(LEGACY)";
            break;
        case SyncOp::CopyDeviceToDevice:
            result.operation = "DeviceSpan::copy_from(span) 4 KiB vs cuMemcpyDtoD_v2 + cuStreamSynchronize(LEGACY)";
            break;
        case SyncOp::CopyFromPageable:
            result.operation = "DeviceSpan::copy_from(host) 4 KiB pageable vs cuMemcpyHtoD_v2 + cuStreamSynchronize(LEGACY)";
            break;
    }
    result.unit = "ns/op";
    add_target_note(result, "synchronous form vs raw call + legacy sync", 1.05, false);
    return result;
}

const CaseRegistrar span_sync_fill_case({"memory/sync-fill-4KiB",
                                         "DeviceSpan::fill (synchronous) of 4 KiB vs raw cuMemsetD32 + "
                                         "cuStreamSynchronize(CU_STREAM_LEGACY)",
                                         true, [](const Settings& s) { return span_sync_op(s, SyncOp::Fill); }});
const CaseRegistrar span_sync_dtod_case({"memory/sync-copy-dtod-4KiB",
                                         "DeviceSpan::copy_from(span) (synchronous) of 4 KiB vs raw cuMemcpyDtoD_v2 + "
                                         "cuStreamSynchronize(CU_STREAM_LEGACY)",
                                         true,
                                         [](const Settings& s) { return span_sync_op(s, SyncOp::CopyDeviceToDevice); }});
const CaseRegistrar span_sync_htod_case({"memory/sync-copy-htod-4KiB",
                                         "DeviceSpan::copy_from(host) (synchronous) of 4 KiB pageable vs raw "
                                         "cuMemcpyHtoD_v2 + cuStreamSynchronize(CU_STREAM_LEGACY)",
                                         true,
                                         [](const Settings& s) { return span_sync_op(s, SyncOp::CopyFromPageable); }});

// =============================================================================
// 6. Stream-ordered allocation from a pool
// =============================================================================

// `iterations` allocate+free pairs of `bytes` per round on the fixture's
// stream from one pool that keeps its memory (release threshold UINT64_MAX),
// timed by compare_pool_pairs. The raw cuMemAlloc_v2 + cuMemFree_v2 pair is
// timed in the same run for the speed-up pools give.
CaseResult pool_alloc_free(const Settings& settings, std::size_t bytes, std::uint64_t default_iterations) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    if (!f->caps.memory_pools) return skipped("device 0 reports no MEMORY_POOLS_SUPPORTED");
    if (!has_entry(&DriverTable::cuMemAllocFromPoolAsync_v11020)) return skipped("the driver has no pool entries (11.2+)");
    auto info = current_device_memory_info();
    if (!info) return failed(info.error().describe());
    if (info->free_bytes < 4 * bytes) return skipped("device 0 has less than four times " + std::to_string(bytes) + " bytes free");
    static std::optional<MemoryPool> pool;
    if (!pool) {
        auto made = MemoryPool::create(PoolProperties::device(0));
        if (!made) return failed(made.error().describe());
        if (auto kept = made->set_release_threshold(std::numeric_limits<std::uint64_t>::max()); !kept)
            return failed(kept.error().describe());
        pool.emplace(std::move(*made));
    }
    CaseResult result = compare_pool_pairs(settings, default_iterations, *pool, f->stream, bytes);
    if (result.status != Status::Ok) return result;
    // The allocation pools replace, a few hundred pairs (it costs ~100 us each).
    const DriverTable& cu = driver();
    std::vector<double> plain;
    for (int sample = 0; sample < 5; ++sample) {
        const auto start = Clock::now();
        constexpr int kPlain = 100;
        for (int i = 0; i < kPlain; ++i) {
            CUdeviceptr pointer = 0;
            if (cu.cuMemAlloc_v3020(&pointer, bytes) != CUDA_SUCCESS || cu.cuMemFree_v3020(pointer) != CUDA_SUCCESS)
                return failed("raw cuMemAlloc_v2 + cuMemFree_v2 failed");
        }
        plain.push_back(elapsed_ns(start, Clock::now()) / kPlain);
    }
    result.operation = "alloc+free " + std::to_string(bytes / kMiB) + " MiB in stream order from a pool";
    result.unit = "ns/op";
    result.extra.push_back({"cuMemAlloc_cuMemFree_ns", median(plain)});
    result.notes.push_back("raw cuMemAlloc_v2 + cuMemFree_v2 of the same size: " + format("%.0f", median(plain)) +
                           " ns/op, " + format("%.1f", median(plain) / result.cudyn) + "x the time of cudyn's pool path");
    add_target_note(result, "StreamOrderedBuffer vs raw pool path", 1.05, false);
    return result;
}

const CaseRegistrar pool_alloc_1m({"pool/alloc-free-1MiB",
                                   "StreamOrderedBuffer<std::byte> of 1 MiB from a pool vs raw cuMemAllocFromPoolAsync + "
                                   "cuMemFreeAsync (10,000 per sample), and vs cuMemAlloc_v2 + cuMemFree_v2",
                                   true, [](const Settings& s) { return pool_alloc_free(s, kMiB, 10000); }});
const CaseRegistrar pool_alloc_64m({"pool/alloc-free-64MiB",
                                    "StreamOrderedBuffer<std::byte> of 64 MiB from a pool vs raw "
                                    "cuMemAllocFromPoolAsync + cuMemFreeAsync (5,000 per sample), and vs "
                                    "cuMemAlloc_v2 + cuMemFree_v2",
                                    true, [](const Settings& s) { return pool_alloc_free(s, 64 * kMiB, 5000); }});


// =============================================================================
// The memory ledger's share of an allocation: the raw driver path, and the
// same path with one ledger entry counted in and out around each pair (what
// every owner adds). Run with CUDYN_LEDGER=0 for the switched-off path.
// =============================================================================

CaseResult ledger_overhead(const Settings& settings, bool stream_ordered, std::uint64_t default_iterations) {
    std::string error;
    const MemoryFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    if (stream_ordered && !has_entry(&DriverTable::cuMemAllocAsync_v11020))
        return skipped("the driver has no stream-ordered allocation (11.2+)");
    if (stream_ordered && !f->caps.memory_pools) return skipped("device 0 reports no MEMORY_POOLS_SUPPORTED");
    const std::size_t bytes = kMiB;
    const DriverTable& cu = driver();
    const CUstream stream = f->stream.handle();
    const MemoryKind kind = stream_ordered ? MemoryKind::StreamOrdered : MemoryKind::Device;
    // One allocation and free, with or without its ledger entry.
    const auto pair = [&](bool counted) -> Result<void> {
        CUdeviceptr pointer = 0;
        if (stream_ordered)
            CUDYN_TRY(raw_result(cu.cuMemAllocAsync_v11020(&pointer, bytes, stream), "cuMemAllocAsync"));
        else
            CUDYN_TRY(raw_result(cu.cuMemAlloc_v3020(&pointer, bytes), "cuMemAlloc_v2"));
        detail::LedgerTicket ticket;  // opened in place, as every owner counts its memory
        if (counted) ticket.open(kind, 0, bytes, static_cast<std::uintptr_t>(pointer));
        keep(pointer);
        if (stream_ordered) return raw_result(cu.cuMemFreeAsync_v11020(pointer, stream), "cuMemFreeAsync");
        return raw_result(cu.cuMemFree_v3020(pointer), "cuMemFree_v2");
    };
    const auto side = [&](bool counted) {
        return [&, counted](std::uint64_t n) {
            std::uint64_t wrong = 0;
            for (std::uint64_t i = 0; i < n; ++i) wrong += !pair(counted).has_value();
            return wrong + (cu.cuStreamSynchronize_v2000(stream) != CUDA_SUCCESS);
        };
    };
    // The stream-ordered pair changes speed as the pool case's does: slices.
    CaseResult result = compare_loops(settings, default_iterations, side(false), side(true),
                                      stream_ordered ? kPoolSlices : 1, kPoolRounds);
    if (result.status != Status::Ok) return result;
    result.operation = std::string(stream_ordered ? "cuMemAllocAsync+cuMemFreeAsync" : "cuMemAlloc+cuMemFree") +
                       " 1 MiB, + one ledger entry";
    result.unit = "ns/op";
    result.notes.push_back(ledger::enabled() ? "ledger on" : "ledger off (CUDYN_LEDGER=0 or built with -Dledger=false)");
    add_target_note(result, "allocation + ledger entry vs allocation", 1.02, false);
    return result;
}

const CaseRegistrar ledger_alloc_case({"ledger/alloc-free-1MiB",
                                       "cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB with one ledger entry vs without",
                                       true, [](const Settings& s) { return ledger_overhead(s, false, 200); }});
const CaseRegistrar ledger_pool_case({"ledger/stream-ordered-1MiB",
                                      "cuMemAllocAsync + cuMemFreeAsync of 1 MiB with one ledger entry vs without "
                                      "(10,000 per sample)",
                                      true, [](const Settings& s) { return ledger_overhead(s, true, 10000); }});

}  // namespace

}  // namespace cudyn::bench
