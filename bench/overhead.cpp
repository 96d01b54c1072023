// cudyn-bench --overhead: cudyn's own work per operation, in nanoseconds,
// without a GPU. The cases of the cost budget (docs/performance.md) run
// against the null driver (null-driver/), whose hot entries answer at once,
// so a round's cudyn time minus its raw time is what cudyn adds: its checks,
// the context it keeps, the ledger entry, the extra driver calls it makes
// (each then as cheap as the null driver answers it). The figure is the
// median of the rounds' differences. It prints; it never fails on a timing
// (exit status 1 only when a case failed outright).
#include "harness.hpp"

#include "cudyn/loader/loader.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace cudyn::bench {

namespace {

// The cases the budget covers, in the budget table's order.
const char* const kBudgetCases[] = {
    "memory/alloc-free-1MiB", "pool/alloc-free-1MiB",  "pool/alloc-free-64MiB", "peer/pool-alloc-free-1MiB",
    "ipc/get-mem-handle",     "ipc/export-range",      "vmm/cycle-2MiB",        "vmm/map-unmap",
    "ledger/stream-ordered-1MiB",
};

// Nanoseconds per unit of a case's figures ("us/op" -> 1000).
double ns_per(const std::string& unit) { return unit.rfind("us", 0) == 0 ? 1000.0 : unit.rfind("ms", 0) == 0 ? 1e6 : 1.0; }

// The null driver's calls so far, by entry name (empty where it is not loaded).
std::vector<std::pair<std::string, std::uint64_t>> null_driver_calls() {
    using Calls = int (*)(const char* const**, const std::uint64_t**);
    std::vector<std::pair<std::string, std::uint64_t>> calls;
    void* library = dlopen(std::getenv("CUDYN_DRIVER_PATH"), RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) return calls;
    const auto query = reinterpret_cast<Calls>(dlsym(library, "cudyn_null_driver_calls"));
    if (query != nullptr) {
        const char* const* names = nullptr;
        const std::uint64_t* counts = nullptr;
        const int n = query(&names, &counts);
        for (int i = 0; i < n; ++i) calls.emplace_back(names[i], counts[i]);
    }
    dlclose(library);
    return calls;
}

// Points the process at the null driver (over the emulated fake) before
// anything loads a driver; false (with why) where either was not built.
bool use_null_driver(std::string& why) {
#if defined(CUDYN_BENCH_NULL_DRIVER) && defined(CUDYN_BENCH_FAKE_DRIVER)
    setenv("CUDYN_DRIVER_PATH", CUDYN_BENCH_NULL_DRIVER, 1);
    setenv("CUDYN_NULL_DRIVER_BACKING", CUDYN_BENCH_FAKE_DRIVER, 0);
    setenv("FAKECUDA_DEVICES", "2", 0);  // the peer pool case needs two
    (void)why;
    return true;
#else
    why = "this build has no null driver or no emulated fake driver (configure with the tests enabled)";
    return false;
#endif
}

}  // namespace

int run_overhead(Settings settings, const std::string& filter) {
    std::string why;
    if (!use_null_driver(why)) {
        std::printf("cudyn-bench --overhead: skipped: %s\n", why.c_str());
        return 0;
    }
    // Loaded now, so the first case's call counts have a "before".
    if (const auto status = driver_status(); !status) {
        std::printf("cudyn-bench --overhead: skipped: the null driver did not load: %s\n",
                    status.error().describe().c_str());
        return 0;
    }
    // The cases' defaults suit a real driver (an allocation of microseconds);
    // against the null one an operation takes nanoseconds, so more per sample.
    if (settings.iterations == 0) settings.iterations = 20000;
    if (settings.repetitions == 0) settings.repetitions = 11;

    std::printf("cudyn's own work per operation: each case against the null driver (hot entries answer at once,\n"
                "the rest is the emulated fake's), %d rounds of %llu operations a side; cudyn - raw is the median\n"
                "of the rounds' differences. Figures of this machine; they fail nothing.\n\n",
                settings.repetitions, static_cast<unsigned long long>(settings.iterations));
    std::printf("%-28s %12s %12s %14s %19s  %s\n", "case", "raw ns/op", "cudyn ns/op", "cudyn-raw ns", "rounds' min-max",
                "null-driver calls per operation, raw + cudyn");
    bool any_failed = false;
    for (const char* name : kBudgetCases) {
        const Case* benchmark_case = find_case(name);
        if (benchmark_case == nullptr || (!filter.empty() && std::strstr(name, filter.c_str()) == nullptr)) continue;
        const auto before = null_driver_calls();
        const CaseResult result = benchmark_case->run(settings);
        const auto after = null_driver_calls();
        if (result.status != Status::Ok) {
            std::printf("%-28s %s: %s\n", name, result.status == Status::Skipped ? "skipped" : "failed", result.reason.c_str());
            any_failed = any_failed || result.status == Status::Failed;
            continue;
        }
        const double scale = ns_per(result.unit);
        std::vector<double> differences;
        for (std::size_t i = 0; i < result.raw_samples.size() && i < result.cudyn_samples.size(); ++i)
            differences.push_back((result.cudyn_samples[i] - result.raw_samples[i]) * scale);
        const Spread spread_of = spread(differences);
        // The null entries' calls in the case over its operations of one side
        // (the warm-up round included): raw's calls plus cudyn's, per operation.
        std::string calls;
        const double operations = static_cast<double>(result.iterations) *
                                  static_cast<double>(result.raw_samples.size() + 1);
        for (std::size_t i = 0; i < after.size() && i < before.size(); ++i) {
            const double per_op = static_cast<double>(after[i].second - before[i].second) / operations;
            if (per_op >= 0.05) calls += (calls.empty() ? "" : ", ") + after[i].first + " " + format("%.2f", per_op);
        }
        std::printf("%-28s %12.1f %12.1f %14.1f %9.1f-%-9.1f  %s\n", name, result.raw * scale, result.cudyn * scale,
                    spread_of.median, spread_of.min, spread_of.max, calls.c_str());
        std::fflush(stdout);
    }
    return any_failed ? 1 : 0;
}

}  // namespace cudyn::bench
