// cudyn-bench — the harness: case registry, timing helpers, child processes,
// the table on stdout and the JSON file. A case times one operation through
// cudyn and the same operation on the raw driver in rounds, each round one
// raw sample and one cudyn sample taken back to back, and reports both sides
// and the ratio of each round (paired_ratio); cases register themselves at namespace scope
// (CaseRegistrar), and those that must measure a fresh process register a
// child the harness re-executes (/proc/self/exe --child NAME).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cudyn::bench {

// Command-line knobs every case may read. Zero means "the case's default".
struct Settings {
    int repetitions = 0;         // timed repetitions per side of an in-process case
    std::uint64_t iterations = 0;  // operations per repetition of an in-process case
    int processes = 0;           // fresh processes per side of a first-use case
    int value_or_repetitions(int fallback) const { return repetitions > 0 ? repetitions : fallback; }
    std::uint64_t value_or_iterations(std::uint64_t fallback) const { return iterations > 0 ? iterations : fallback; }
    int value_or_processes(int fallback) const { return processes > 0 ? processes : fallback; }
};

enum class Status { Ok, Skipped, Failed };

// What one case reports. raw and cudyn are in `unit` (per operation for
// per-call cases, per process for first-use cases). raw_samples[i] and
// cudyn_samples[i] are round i: taken back to back, so what drifts over the
// run (clocks, caches, the driver's state) touches both alike, and their
// quotient is the round's ratio.
struct CaseResult {
    Status status = Status::Ok;
    std::string reason;           // why skipped or failed
    std::string operation;        // what was timed ("cuCtxGetCurrent", "dlopen+cuInit+resolve 83")
    double raw = 0;
    double cudyn = 0;
    std::string unit;             // "ns/call", "ms", ...
    std::uint64_t iterations = 0; // operations per timed sample
    int samples = 0;              // timed samples per side
    std::string statistic;        // how raw/cudyn were chosen from the samples ("min", "median")
    std::vector<std::pair<std::string, double>> extra;  // further numbers, e.g. {"delta_ms", 0.12}
    std::vector<std::string> notes;                     // printed under the table
    std::vector<double> raw_samples;                    // one per round, for the ratio and the JSON file
    std::vector<double> cudyn_samples;                  // the same rounds, in the same order

    // The median of the rounds' ratios (paired_ratio), 0 where there is none
    // (rounds missing or unequal, or either side bimodal).
    double ratio() const;
};

CaseResult skipped(std::string reason);
CaseResult failed(std::string reason);

using CaseFunction = CaseResult (*)(const Settings&);
using ChildFunction = int (*)();  // prints its result on stdout; exit status 0, or kChildSkip

struct Case {
    const char* name;         // "group/what", unique; --filter matches a substring of it
    const char* description;  // one line for --list
    bool needs_driver;        // skipped with driver_status()'s reason when the driver is unusable
    CaseFunction run;
};

// A child that cannot measure (e.g. the driver lacks an entry point the raw
// path needs) prints its reason and exits with this status; the case skips.
inline constexpr int kChildSkip = 77;

struct CaseRegistrar {
    explicit CaseRegistrar(const Case& benchmark_case);
};
struct ChildRegistrar {
    ChildRegistrar(const char* name, ChildFunction function);
};

// --- timing ------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

inline double elapsed_ns(Clock::time_point start, Clock::time_point end) {
    return std::chrono::duration<double, std::nano>(end - start).count();
}
inline double elapsed_ms(Clock::time_point start, Clock::time_point end) {
    return std::chrono::duration<double, std::milli>(end - start).count();
}

double median(std::vector<double> values);  // 0 for an empty list
double minimum(const std::vector<double>& values);

// One side's samples summarized: min / median / max, and whether they fall in
// two separate groups (bimodal: the widest gap between sorted neighbours is
// over a quarter of the median, with at least two samples on each side of it).
// A median of bimodal data says which group happened to be larger, not how
// fast the operation is: such a case never states "faster than raw".
struct Spread {
    double min = 0;
    double median = 0;
    double max = 0;
    bool bimodal = false;
};
Spread spread(std::vector<double> samples);

// A case's ratio from its paired rounds: cudyn_samples[i] / raw_samples[i]
// for each round, summarized by their median with min / quartiles / max. The
// quotient of two separate medians is not used: it can come from two
// different rounds and hide how far the rounds disagree. Where either side's
// rounds are bimodal there is no ratio (`available` false): which group a
// round fell into would decide it.
struct PairedRatio {
    bool paired = false;        // equal, non-empty rounds with a positive raw sample each
    bool raw_bimodal = false;
    bool cudyn_bimodal = false;
    bool available = false;     // paired and neither side bimodal
    double median = 0, min = 0, q1 = 0, q3 = 0, max = 0;  // of the rounds' ratios (set when paired)
    std::vector<double> rounds; // every round's ratio, in round order
    // "" where available; else why not ("bimodal: no ratio", "unpaired: no ratio").
    std::string why_none() const;
};
PairedRatio paired_ratio(const CaseResult& result);

// Makes the compiler assume `value` is read (so the loop computing it stays)
// and that memory may have changed (so globals are reloaded after it).
// GCC/Clang inline asm: the harness is POSIX-only (it re-executes itself).
template <typename T>
inline void keep(T value) {
    static_assert(std::is_integral_v<T> || std::is_pointer_v<T>, "keep() takes a scalar that fits a register");
    __asm__ __volatile__("" : : "r"(value) : "memory");
}

// A compiler barrier: memory may have changed, reload what you read.
inline void clobber_memory() { __asm__ __volatile__("" : : : "memory"); }

// --- in-process comparisons --------------------------------------------------

// Times raw_loop(n) and cudyn_loop(n) as a pair per round, `repetitions`
// rounds after one short warm-up, the side going first alternating by round
// (so a drift during the run favours neither), and reports the median ns per
// operation of each side (the best of each goes in `extra`). A
// loop returns how many of its calls gave a wrong answer (checking the answers
// also keeps the compiler from dropping the calls); any is a failure. The
// caller fills in operation and unit.
//
// With `slices` > 1 each round's operations are split into that many slices
// a side, the sides taking turns slice by slice (the first alternating), and
// a round's figure is its side's slices summed. For operations whose driver
// changes speed within a process (the stream-ordered pool pair): whole
// rounds a side apart fell into different speeds often enough to move the
// ratio by more than cudyn's own work; slices that take turns see the same
// speeds.
template <typename RawLoop, typename CudynLoop>
CaseResult compare_loops(const Settings& settings, std::uint64_t default_iterations, RawLoop raw_loop,
                         CudynLoop cudyn_loop, int slices = 1, int default_repetitions = 7) {
    const std::uint64_t iterations = settings.value_or_iterations(default_iterations);
    const int repetitions = settings.value_or_repetitions(default_repetitions);
    const std::uint64_t slice_count = static_cast<std::uint64_t>(std::max(slices, 1));
    const std::uint64_t per_slice = std::max<std::uint64_t>(iterations / slice_count, 1);

    // Nanoseconds of one slice of `loop`.
    const auto timed = [per_slice](auto& loop, std::uint64_t& wrong) {
        const auto start = Clock::now();
        wrong += loop(per_slice);
        const auto end = Clock::now();
        return elapsed_ns(start, end);
    };

    std::uint64_t raw_wrong = raw_loop(std::min<std::uint64_t>(iterations, 100000));
    std::uint64_t cudyn_wrong = cudyn_loop(std::min<std::uint64_t>(iterations, 100000));
    CaseResult result;
    for (int repetition = 0; repetition < repetitions; ++repetition) {
        double raw_ns = 0;
        double cudyn_ns = 0;
        for (std::uint64_t slice = 0; slice < slice_count; ++slice) {
            if ((static_cast<std::uint64_t>(repetition) + slice) % 2 == 0) {
                raw_ns += timed(raw_loop, raw_wrong);
                cudyn_ns += timed(cudyn_loop, cudyn_wrong);
            } else {
                cudyn_ns += timed(cudyn_loop, cudyn_wrong);
                raw_ns += timed(raw_loop, raw_wrong);
            }
        }
        const double operations = static_cast<double>(per_slice * slice_count);
        result.raw_samples.push_back(raw_ns / operations);
        result.cudyn_samples.push_back(cudyn_ns / operations);
    }
    if (raw_wrong != 0 || cudyn_wrong != 0)
        return failed("wrong answers: raw " + std::to_string(raw_wrong) + ", cudyn " + std::to_string(cudyn_wrong));

    std::vector<double> differences;
    for (std::size_t i = 0; i < result.raw_samples.size(); ++i)
        differences.push_back(result.cudyn_samples[i] - result.raw_samples[i]);
    result.raw = median(result.raw_samples);
    result.cudyn = median(result.cudyn_samples);
    result.iterations = per_slice * slice_count;
    result.samples = repetitions;
    result.statistic = "median";
    result.extra = {
        {"delta_ns", median(differences)},  // the median of the rounds' differences
        {"raw_best", minimum(result.raw_samples)},
        {"cudyn_best", minimum(result.cudyn_samples)},
    };
    return result;
}

// --- notes -----------------------------------------------------------------

// `value` through a printf pattern with one double ("%.3f").
std::string format(const char* pattern, double value);

// "WHAT: cudyn/raw R, target <= L: met" (or ">= L" when higher is better),
// the line every case with a ratio target prints; R is the paired ratio, and
// where there is none the line says why and that the target is not judged.
void add_target_note(CaseResult& result, const char* what, double limit, bool higher_is_better = false);

// --- child processes ---------------------------------------------------------

struct ChildOutcome {
    int exit_status = -1;  // the child's exit status, -1 if it did not exit normally
    std::string output;    // everything it wrote to stdout and stderr
    std::string error;     // set when it could not be started or did not exit normally
};

// Runs this executable again as `--child name` in a fresh process, with the
// same environment, and collects its output.
ChildOutcome run_child(const std::string& name);

// The registered case named exactly `name`, or null.
const Case* find_case(const char* name);

// --overhead (overhead.cpp): the cost-budget cases against the null driver,
// cudyn's own nanoseconds per operation (those whose name contains `filter`
// when it is not empty). Exit status 1 only when one failed.
int run_overhead(Settings settings, const std::string& filter);

// The harness: parses the options, runs the selected cases, prints the
// table and writes the JSON file.
int run_harness(int argc, char** argv);

}  // namespace cudyn::bench
