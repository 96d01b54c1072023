// cudyn-bench — loader cases: first use of the driver in a fresh process, the
// cost of one call through the table, and the cost of reaching the table.
//
// The raw side of every case is what a program without cudyn would write:
// dlopen the same library, cuInit, and ask cuGetProcAddress_v2 for the same
// (name, ABI version, CU_GET_PROC_ADDRESS_LEGACY_STREAM) triples, taken from
// cudyn::driver_entries so both sides resolve exactly the same list.
#include "harness.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/driver_table.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/device/primary_context.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace cudyn::bench {

namespace {

using ProcAddressV2 = PFN_cuGetProcAddress_v12000;  // the form with the status out-parameter
constexpr cuuint64_t kResolveFlags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;

std::string format_ms(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%+.3f ms", value);
    return buffer;
}

// =============================================================================
// 1. First use in a fresh process
// =============================================================================

// Children print one line "result <key>=<value> ..." after they stop their
// clock; anything else they print (a driver's chatter, an error) is ignored
// by the parser and quoted when the child fails.

// The raw baseline: dlopen + cuInit(0) + cuGetProcAddress_v2 for every entry
// of cudyn's list. Same path rule as cudyn (CUDYN_DRIVER_PATH, absolute, else
// libcuda.so.1) and the same dlopen flags.
int child_first_use_raw() {
    const char* override_path = ::secure_getenv("CUDYN_DRIVER_PATH");
    const std::string path = override_path != nullptr && *override_path != '\0' ? override_path : "libcuda.so.1";
    if (path != "libcuda.so.1" && path[0] != '/') {
        std::printf("CUDYN_DRIVER_PATH is not absolute: '%s'\n", path.c_str());
        return kChildSkip;
    }

    const auto start = Clock::now();
    void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    const auto opened = Clock::now();
    if (library == nullptr) {
        const char* reason = ::dlerror();
        std::printf("dlopen(%s) failed: %s\n", path.c_str(), reason != nullptr ? reason : "unknown error");
        return 1;
    }
    const auto init = reinterpret_cast<PFN_cuInit_v2000>(::dlsym(library, "cuInit"));
    const auto proc_address = reinterpret_cast<ProcAddressV2>(::dlsym(library, "cuGetProcAddress_v2"));
    if (init == nullptr || proc_address == nullptr) {
        std::printf("%s has no %s: the raw baseline resolves through cuGetProcAddress_v2 (driver 12.0+)\n",
                    path.c_str(), init == nullptr ? "cuInit" : "cuGetProcAddress_v2");
        return kChildSkip;
    }
    const CUresult init_result = init(0);
    const auto initialised = Clock::now();
    if (init_result != CUDA_SUCCESS) {
        std::printf("cuInit(0) returned %d\n", static_cast<int>(init_result));
        return 1;
    }
    void* table[driver_entry_count] = {};
    std::size_t resolved = 0;
    for (std::size_t i = 0; i < driver_entry_count; ++i) {
        const DriverEntryInfo& entry = driver_entries[i];
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        const CUresult rc = proc_address(entry.name, &table[i], entry.version, kResolveFlags, &status);
        if (rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && table[i] != nullptr) ++resolved;
        else table[i] = nullptr;
    }
    const auto end = Clock::now();
    keep(&table[0]);

    std::printf("result total_ms=%.6f dlopen_ms=%.6f cuinit_ms=%.6f resolve_ms=%.6f resolved=%zu\n",
                elapsed_ms(start, end), elapsed_ms(start, opened), elapsed_ms(opened, initialised),
                elapsed_ms(initialised, end), resolved);
    return 0;
}

// cudyn's first use: load_report() opens, initialises and resolves the table.
int child_first_use_cudyn() {
    const auto start = Clock::now();
    const LoadReport& report = cudyn::load_report();
    const auto end = Clock::now();
    if (report.state != LoadState::Loaded) {
        std::printf("cudyn could not load the driver (%s): %s\n", cudyn::to_string(report.state),
                    report.message.c_str());
        return 1;
    }
    std::printf("result total_ms=%.6f self_reported_ms=%.6f resolved=%zu\n", elapsed_ms(start, end),
                report.load_milliseconds, report.resolved_count());
    return 0;
}

const ChildRegistrar first_use_raw_child("first-use-raw", child_first_use_raw);
const ChildRegistrar first_use_cudyn_child("first-use-cudyn", child_first_use_cudyn);

struct ChildResult {
    bool ok = false;
    bool skip = false;
    std::string problem;
    std::vector<std::pair<std::string, double>> values;

    double get(const std::string& key) const {
        for (const auto& [name, value] : values)
            if (name == key) return value;
        return 0;
    }
};

std::string last_line(const std::string& text) {
    std::string trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r')) trimmed.pop_back();
    const auto newline = trimmed.rfind('\n');
    return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

ChildResult run_measuring_child(const char* name) {
    ChildResult result;
    const ChildOutcome outcome = run_child(name);
    if (!outcome.error.empty()) {
        result.problem = outcome.error;
        return result;
    }
    if (outcome.exit_status != 0) {
        result.skip = outcome.exit_status == kChildSkip;
        result.problem = result.skip ? last_line(outcome.output)
                                     : std::string("child ") + name + " exited " +
                                           std::to_string(outcome.exit_status) + ": " + last_line(outcome.output);
        return result;
    }
    std::istringstream lines(outcome.output);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("result ", 0) != 0) continue;
        std::istringstream fields(line.substr(7));
        std::string field;
        while (fields >> field) {
            const auto equals = field.find('=');
            if (equals == std::string::npos) continue;
            result.values.emplace_back(field.substr(0, equals), std::strtod(field.c_str() + equals + 1, nullptr));
        }
        result.ok = !result.values.empty();
    }
    if (!result.ok) result.problem = std::string("child ") + name + " printed no result: " + last_line(outcome.output);
    return result;
}

CaseResult first_use(const Settings& settings) {
    const int processes = settings.value_or_processes(15);
    std::vector<double> raw, cudyn, paired, raw_dlopen, raw_init, raw_resolve, self_reported;
    double raw_resolved = 0, cudyn_resolved = 0;

    // Pair 0 warms the page cache and the driver's one-time costs and is not
    // counted. Pairs alternate which side runs first, so a slow drift in the
    // machine's state does not favour one side.
    for (int pair = 0; pair <= processes; ++pair) {
        ChildResult raw_child, cudyn_child;
        if (pair % 2 == 0) {
            raw_child = run_measuring_child("first-use-raw");
            cudyn_child = run_measuring_child("first-use-cudyn");
        } else {
            cudyn_child = run_measuring_child("first-use-cudyn");
            raw_child = run_measuring_child("first-use-raw");
        }
        for (const ChildResult* child : {&raw_child, &cudyn_child}) {
            if (child->skip) return skipped(child->problem);
            if (!child->ok) return failed(child->problem);
        }
        if (pair == 0) continue;
        raw.push_back(raw_child.get("total_ms"));
        cudyn.push_back(cudyn_child.get("total_ms"));
        paired.push_back(cudyn.back() - raw.back());
        raw_dlopen.push_back(raw_child.get("dlopen_ms"));
        raw_init.push_back(raw_child.get("cuinit_ms"));
        raw_resolve.push_back(raw_child.get("resolve_ms"));
        self_reported.push_back(cudyn_child.get("self_reported_ms"));
        raw_resolved = raw_child.get("resolved");
        cudyn_resolved = cudyn_child.get("resolved");
    }

    CaseResult result;
    result.operation = "dlopen+cuInit+resolve " + std::to_string(driver_entry_count) + " entries";
    result.raw = median(raw);
    result.cudyn = median(cudyn);
    result.unit = "ms";
    result.iterations = 1;
    result.samples = processes;
    result.statistic = "median";
    result.raw_samples = raw;
    result.cudyn_samples = cudyn;

    const double delta = result.cudyn - result.raw;
    const double paired_delta = median(paired);
    constexpr double kTargetMs = 0.5;
    result.extra = {
        {"delta_ms", delta},
        {"paired_delta_ms", paired_delta},
        {"target_delta_ms", kTargetMs},
        {"raw_min_ms", minimum(raw)},
        {"cudyn_min_ms", minimum(cudyn)},
        {"raw_dlopen_ms", median(raw_dlopen)},
        {"raw_cuinit_ms", median(raw_init)},
        {"raw_resolve_ms", median(raw_resolve)},
        {"cudyn_self_reported_ms", median(self_reported)},
        {"raw_resolved", raw_resolved},
        {"cudyn_resolved", cudyn_resolved},
    };
    result.notes.push_back("cudyn - raw = " + format_ms(delta) + " (medians of " + std::to_string(processes) +
                           " fresh processes per side; median of paired differences " + format_ms(paired_delta) +
                           "); target within " + format_ms(kTargetMs).substr(1) + ": " +
                           (delta <= kTargetMs ? "met" : "NOT met"));
    char phases[200];
    std::snprintf(phases, sizeof phases,
                  "raw phases (medians): dlopen %.3f ms, cuInit %.3f ms, resolve %.3f ms; "
                  "cudyn's own load_milliseconds %.3f ms",
                  median(raw_dlopen), median(raw_init), median(raw_resolve), median(self_reported));
    result.notes.push_back(phases);
    if (raw_resolved != cudyn_resolved)
        result.notes.push_back("raw resolved " + std::to_string(static_cast<int>(raw_resolved)) +
                               " entries through cuGetProcAddress_v2, cudyn " +
                               std::to_string(static_cast<int>(cudyn_resolved)) +
                               " (cudyn also tries cuGetProcAddress and dlsym for what v2 refuses)");
    return result;
}

const CaseRegistrar first_use_case({
    "loader/first-use",
    "dlopen + cuInit + resolving the whole table in a fresh process: cudyn::load_report() vs raw",
    true,
    first_use,
});

// =============================================================================
// 2. Per-call overhead through the table
// =============================================================================

// The raw pointers come from cuGetProcAddress_v2 of the library cudyn opened
// (the same handle: RTLD_NOLOAD), so both sides call the same function.
struct CallFixture {
    cudyn::Device device;
    cudyn::PrimaryContext context;  // retained and current on this thread for the whole run
    PFN_cuCtxGetCurrent_v4000 raw_ctx_get_current = nullptr;
    PFN_cuDeviceGetAttribute_v2000 raw_device_get_attribute = nullptr;
    std::vector<std::string> notes;
};

template <typename Pfn>
Pfn resolve_raw(ProcAddressV2 proc_address, Pfn DriverTable::*member, std::string& error) {
    const DriverEntryInfo& entry = cudyn::entry_info(member);
    void* function = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult rc = proc_address(entry.name, &function, entry.version, kResolveFlags, &status);
    if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || function == nullptr) {
        error = std::string("cuGetProcAddress_v2(\"") + entry.name + "\", " + std::to_string(entry.version) +
                ") gave rc " + std::to_string(static_cast<int>(rc)) + ", status " +
                std::to_string(static_cast<int>(status));
        return nullptr;
    }
    return reinterpret_cast<Pfn>(function);
}

std::optional<CallFixture> make_call_fixture(std::string& error) {
    if (auto status = cudyn::driver_status(); !status) {
        error = status.error().describe();
        return std::nullopt;
    }
    auto device = cudyn::Device::get(0);
    if (!device) {
        error = device.error().describe();
        return std::nullopt;
    }
    auto context = cudyn::PrimaryContext::activate(*device);
    if (!context) {
        error = context.error().describe();
        return std::nullopt;
    }

    const LoadReport& report = cudyn::load_report();
    void* library = nullptr;
    for (const std::string& path : {report.requested_path, report.library_path})
        if (library == nullptr && !path.empty()) library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (library == nullptr) {
        error = "could not reach the library cudyn opened (" + report.library_path + ") with RTLD_NOLOAD";
        return std::nullopt;
    }
    const auto proc_address = reinterpret_cast<ProcAddressV2>(::dlsym(library, "cuGetProcAddress_v2"));
    if (proc_address == nullptr) {
        error = report.library_path + " has no cuGetProcAddress_v2: the raw baseline resolves through it";
        return std::nullopt;
    }

    CallFixture fixture{*device, std::move(*context), nullptr, nullptr, {}};
    fixture.raw_ctx_get_current = resolve_raw(proc_address, &DriverTable::cuCtxGetCurrent_v4000, error);
    if (fixture.raw_ctx_get_current == nullptr) return std::nullopt;
    fixture.raw_device_get_attribute = resolve_raw(proc_address, &DriverTable::cuDeviceGetAttribute_v2000, error);
    if (fixture.raw_device_get_attribute == nullptr) return std::nullopt;

    const DriverTable& table = cudyn::driver();
    if (table.cuCtxGetCurrent_v4000 != fixture.raw_ctx_get_current ||
        table.cuDeviceGetAttribute_v2000 != fixture.raw_device_get_attribute)
        fixture.notes.push_back("the raw pointer differs from cudyn's table entry: the two sides call different functions");
    return fixture;
}

// Built once and kept for the rest of the run: releasing the primary context
// between cases would destroy and recreate it.
const CallFixture* call_fixture(std::string& error) {
    static std::string fixture_error;
    static std::optional<CallFixture> fixture = make_call_fixture(fixture_error);
    error = fixture_error;
    return fixture ? &*fixture : nullptr;
}

// The raw side of both cuCtxGetCurrent cases.
auto raw_ctx_get_current_loop(PFN_cuCtxGetCurrent_v4000 raw_function, CUcontext expected) {
    return [raw_function, expected](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            CUcontext current = nullptr;
            const CUresult rc = raw_function(&current);
            wrong += static_cast<std::uint64_t>(rc != CUDA_SUCCESS) | static_cast<std::uint64_t>(current != expected);
        }
        return wrong;
    };
}

CaseResult call_ctx_get_current(const Settings& settings) {
    std::string error;
    const CallFixture* fixture = call_fixture(error);
    if (fixture == nullptr) return skipped(error);
    const CUcontext expected = fixture->context.handle();

    const auto cudyn_loop = [expected](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            CUcontext current = nullptr;
            const Result<void> rc = cudyn::call_driver(&DriverTable::cuCtxGetCurrent_v4000, &current);
            wrong += static_cast<std::uint64_t>(!rc.has_value()) | static_cast<std::uint64_t>(current != expected);
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 10000000,
                                      raw_ctx_get_current_loop(fixture->raw_ctx_get_current, expected), cudyn_loop);
    result.operation = "cuCtxGetCurrent";
    result.unit = "ns/call";
    result.notes.insert(result.notes.end(), fixture->notes.begin(), fixture->notes.end());
    return result;
}

const CaseRegistrar ctx_get_current_case({
    "call/cuCtxGetCurrent",
    "one cuCtxGetCurrent: raw pointer from cuGetProcAddress_v2 vs cudyn::call_driver",
    true,
    call_ctx_get_current,
});

// The other documented way in: calling the public table's member directly
// (driver_table.hpp), without call_driver's error mapping. The difference
// from the call_driver case is what the Result and its checks cost.
CaseResult call_ctx_get_current_table(const Settings& settings) {
    std::string error;
    const CallFixture* fixture = call_fixture(error);
    if (fixture == nullptr) return skipped(error);
    const CUcontext expected = fixture->context.handle();

    const auto cudyn_loop = [expected](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            CUcontext current = nullptr;
            const CUresult rc = cudyn::driver().cuCtxGetCurrent_v4000(&current);
            wrong += static_cast<std::uint64_t>(rc != CUDA_SUCCESS) | static_cast<std::uint64_t>(current != expected);
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 10000000,
                                      raw_ctx_get_current_loop(fixture->raw_ctx_get_current, expected), cudyn_loop);
    result.operation = "cuCtxGetCurrent via driver().entry";
    result.unit = "ns/call";
    return result;
}

const CaseRegistrar ctx_get_current_table_case({
    "call/cuCtxGetCurrent-table",
    "one cuCtxGetCurrent: raw pointer vs cudyn::driver().cuCtxGetCurrent_v4000 (no Result)",
    true,
    call_ctx_get_current_table,
});

CaseResult call_device_get_attribute(const Settings& settings) {
    std::string error;
    const CallFixture* fixture = call_fixture(error);
    if (fixture == nullptr) return skipped(error);
    const CUdevice device = fixture->device.handle();
    constexpr CUdevice_attribute kAttribute = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
    const PFN_cuDeviceGetAttribute_v2000 raw_function = fixture->raw_device_get_attribute;
    int expected = 0;
    if (raw_function(&expected, kAttribute, device) != CUDA_SUCCESS)
        return failed("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT) failed on device 0");

    const auto raw_loop = [raw_function, device, expected](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            int value = 0;
            const CUresult rc = raw_function(&value, kAttribute, device);
            wrong += static_cast<std::uint64_t>(rc != CUDA_SUCCESS) | static_cast<std::uint64_t>(value != expected);
        }
        return wrong;
    };
    const auto cudyn_loop = [device, expected](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            int value = 0;
            const Result<void> rc =
                cudyn::call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &value, kAttribute, device);
            wrong += static_cast<std::uint64_t>(!rc.has_value()) | static_cast<std::uint64_t>(value != expected);
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 10000000, raw_loop, cudyn_loop);
    result.operation = "cuDeviceGetAttribute";
    result.unit = "ns/call";
    return result;
}

const CaseRegistrar device_get_attribute_case({
    "call/cuDeviceGetAttribute",
    "one cuDeviceGetAttribute(MULTIPROCESSOR_COUNT): raw pointer vs cudyn::call_driver",
    true,
    call_device_get_attribute,
});

// =============================================================================
// 3. Reaching the table: cudyn::driver() vs a plain global pointer
// =============================================================================

// What a hand-written loader keeps: a global pointer to its table, set once.
const DriverTable* g_plain_table = nullptr;

CaseResult access_driver_table(const Settings& settings) {
    g_plain_table = &cudyn::driver();  // also loads the driver, outside the timing
    const auto expected = reinterpret_cast<std::uintptr_t>(g_plain_table->cuCtxGetCurrent_v4000);

    // The barrier in each iteration makes the compiler reload the global (and
    // call driver() again) instead of hoisting the read out of the loop.
    const auto raw_loop = [expected](std::uint64_t n) {
        std::uintptr_t sum = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            clobber_memory();
            sum += reinterpret_cast<std::uintptr_t>(g_plain_table->cuCtxGetCurrent_v4000);
        }
        return static_cast<std::uint64_t>(sum != expected * static_cast<std::uintptr_t>(n));
    };
    const auto cudyn_loop = [expected](std::uint64_t n) {
        std::uintptr_t sum = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            clobber_memory();
            sum += reinterpret_cast<std::uintptr_t>(cudyn::driver().cuCtxGetCurrent_v4000);
        }
        return static_cast<std::uint64_t>(sum != expected * static_cast<std::uintptr_t>(n));
    };
    CaseResult result = compare_loops(settings, 100000000, raw_loop, cudyn_loop);
    result.operation = "table read (raw: global pointer)";
    result.unit = "ns/read";
    if (expected == 0) result.notes.push_back("no driver loaded: both sides read a null entry (the cost is the same)");
    return result;
}

const CaseRegistrar access_driver_table_case({
    "access/driver-table",
    "reading one entry through cudyn::driver() vs through a plain global table pointer",
    false,
    access_driver_table,
});

}  // namespace

}  // namespace cudyn::bench
