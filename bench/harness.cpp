// cudyn-bench — the harness: options, registry, child processes, table, JSON.
#include "harness.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/loader.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>

extern char** environ;

#ifndef CUDYN_BENCH_VERSION
#define CUDYN_BENCH_VERSION "unknown"
#endif
#ifndef CUDYN_BENCH_LINKAGE
#define CUDYN_BENCH_LINKAGE "unknown"
#endif

#if defined(__clang__)
#define CUDYN_BENCH_COMPILER "clang++ " __clang_version__
#elif defined(__GNUC__)
#define CUDYN_BENCH_COMPILER "g++ " __VERSION__
#else
#define CUDYN_BENCH_COMPILER "unknown compiler"
#endif

namespace cudyn::bench {

namespace {

// Function-local statics: the registrars of other translation units may run
// before this file's namespace-scope objects are initialised.
std::vector<Case>& case_registry() {
    static std::vector<Case> cases;
    return cases;
}

struct Child {
    const char* name;
    ChildFunction function;
};
std::vector<Child>& child_registry() {
    static std::vector<Child> children;
    return children;
}

const char* to_string(Status status) {
    switch (status) {
        case Status::Ok: return "ok";
        case Status::Skipped: return "skipped";
        case Status::Failed: return "failed";
    }
    return "unknown";
}

// --- options -------------------------------------------------------------------

// Next to the executable, in the build folder: not in whatever folder it runs
// from (a checkout's root, where a results file would get committed).
std::string default_json_path() {
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    const std::string path(exe, n > 0 ? static_cast<std::size_t>(n) : 0);
    const std::size_t slash = path.rfind('/');
    return (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/cudyn-bench.json";
}

struct Options {
    Settings settings;
    std::string filter;
    std::vector<std::string> names;  // --case, exact names
    std::string json_path = default_json_path();
    bool list = false;
    bool help = false;
    bool overhead = false;
};

void print_usage(std::FILE* to) {
    std::fprintf(to,
                 "usage: cudyn-bench [--filter SUBSTRING] [--case NAME]... [--json PATH] [--list] [--overhead]\n"
                 "                   [--repetitions N] [--iterations N] [--processes N]\n"
                 "\n"
                 "Times operations through cudyn against the raw driver in the same run, in\n"
                 "rounds of one raw and one cudyn sample back to back, and prints each side's\n"
                 "median and the ratio (cudyn / raw): the median of the rounds' ratios, with\n"
                 "their lowest and highest. A case whose rounds are bimodal on either side gets\n"
                 "no ratio ('bimodal: no ratio').\n"
                 "\n"
                 "  --filter SUBSTRING  run only the cases whose name contains SUBSTRING\n"
                 "  --case NAME         run the case named exactly NAME (may be repeated; with\n"
                 "                      --filter, a case runs when it matches either)\n"
                 "  --json PATH         write the results as JSON to PATH (default: cudyn-bench.json\n"
                 "                      next to this executable)\n"
                 "  --list              list the cases and exit\n"
                 "  --overhead          cudyn's own ns per operation for the cost-budget cases, against a\n"
                 "                      null driver over the emulated fake (no GPU); prints, writes no JSON\n"
                 "  --repetitions N     timed repetitions per side of in-process cases (default: per case)\n"
                 "  --iterations N      operations per repetition of in-process cases (default: per case)\n"
                 "  --processes N       fresh processes per side of first-use cases (default: per case)\n"
                 "\n"
                 "The driver is chosen as cudyn chooses it: CUDYN_DRIVER_PATH (absolute) or libcuda.so.1.\n"
                 "Cases that need a usable driver are reported as skipped where there is none.\n");
}

bool parse_positive(const char* text, std::uint64_t& value) {
    if (text == nullptr || *text == '\0' || *text == '-') return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long parsed = std::strtoull(text, &end, 10);
    if (errno != 0 || end == nullptr || *end != '\0' || parsed == 0) return false;
    value = parsed;
    return true;
}

// Returns false (after printing why) on a bad command line.
bool parse_options(int argc, char** argv, Options& options) {
    for (int i = 1; i < argc; ++i) {
        const std::string argument = argv[i];
        const auto next = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "cudyn-bench: %s needs a value\n", argument.c_str());
                return nullptr;
            }
            return argv[++i];
        };
        const auto count = [&](std::uint64_t limit, std::uint64_t& out) {
            const char* text = next();
            if (text == nullptr) return false;
            if (!parse_positive(text, out) || out > limit) {
                std::fprintf(stderr, "cudyn-bench: %s takes a positive number (at most %llu), got '%s'\n",
                             argument.c_str(), static_cast<unsigned long long>(limit), text);
                return false;
            }
            return true;
        };
        std::uint64_t number = 0;
        if (argument == "--help" || argument == "-h") {
            options.help = true;
        } else if (argument == "--list") {
            options.list = true;
        } else if (argument == "--overhead") {
            options.overhead = true;
        } else if (argument == "--filter") {
            const char* text = next();
            if (text == nullptr) return false;
            options.filter = text;
        } else if (argument == "--case") {
            const char* text = next();
            if (text == nullptr) return false;
            options.names.push_back(text);
        } else if (argument == "--json") {
            const char* text = next();
            if (text == nullptr) return false;
            if (*text == '\0') {
                std::fprintf(stderr, "cudyn-bench: --json needs a non-empty path\n");
                return false;
            }
            options.json_path = text;
        } else if (argument == "--repetitions") {
            if (!count(1000000, number)) return false;
            options.settings.repetitions = static_cast<int>(number);
        } else if (argument == "--iterations") {
            if (!count(UINT64_MAX, number)) return false;
            options.settings.iterations = number;
        } else if (argument == "--processes") {
            if (!count(100000, number)) return false;
            options.settings.processes = static_cast<int>(number);
        } else {
            std::fprintf(stderr, "cudyn-bench: unknown option '%s'\n", argument.c_str());
            print_usage(stderr);
            return false;
        }
    }
    return true;
}

// --- formatting ----------------------------------------------------------------

std::string format_number(double value, int decimals) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
    return buffer;
}

std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (byte < 0x20) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
                    out += escaped;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

// JSON has no NaN or infinity: those become null.
std::string json_number(double value) {
    if (!std::isfinite(value)) return "null";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.9g", value);
    return buffer;
}

std::string json_numbers(const std::vector<double>& values) {
    std::string out = "[";
    for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + json_number(values[i]);
    return out + "]";
}

std::string utc_timestamp() {
    const std::time_t now = std::time(nullptr);
    std::tm parts{};
    char buffer[32] = "unknown";
    if (::gmtime_r(&now, &parts) != nullptr) std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return buffer;
}

// The compiler that built the benchmark, without the trailing space some
// version macros carry.
std::string compiler_name() {
    std::string name = CUDYN_BENCH_COMPILER;
    while (!name.empty() && name.back() == ' ') name.pop_back();
    return name;
}

std::string host_name() {
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
    return buffer;
}

// --- the run -------------------------------------------------------------------

struct DriverSummary {
    bool queried = false;  // false when no selected case needed the driver
    bool usable = false;
    std::string reason;    // driver_status()'s error, when not usable
    std::string device_name;
};

struct Row {
    const Case* benchmark_case;
    CaseResult result;
};

DriverSummary query_driver() {
    DriverSummary summary;
    summary.queried = true;
    const Result<void> status = cudyn::driver_status();
    summary.usable = status.has_value();
    if (!summary.usable) {
        summary.reason = status.error().describe();
        return summary;
    }
    if (auto device = cudyn::Device::get(0)) {
        if (auto name = device->name()) summary.device_name = *name;
    }
    return summary;
}

void print_header(const DriverSummary& driver) {
    std::printf("cudyn-bench %s (cudyn linked %s, %s)\n", CUDYN_BENCH_VERSION, CUDYN_BENCH_LINKAGE,
                compiler_name().c_str());
    if (!driver.queried) return;
    const LoadReport& report = cudyn::load_report();
    const std::string path = report.library_path.empty() ? report.requested_path : report.library_path;
    if (driver.usable) {
        std::printf("driver: %s, version %d.%d, %s%s%s\n", cudyn::to_string(report.state),
                    report.driver_version / 1000, report.driver_version % 1000 / 10, path.c_str(),
                    driver.device_name.empty() ? "" : ", device 0: ",
                    driver.device_name.c_str());
    } else {
        std::printf("driver: %s (%s): %s\n", cudyn::to_string(report.state), path.c_str(), driver.reason.c_str());
    }
}

void print_table(const std::vector<Row>& rows) {
    const std::vector<std::string> headings = {"case",  "operation",        "raw",  "cudyn",      "ratio",
                                               "rounds' ratios", "unit", "iterations", "samples"};
    std::vector<std::vector<std::string>> cells;
    for (const Row& row : rows) {
        const CaseResult& r = row.result;
        if (r.status != Status::Ok) {
            cells.push_back({row.benchmark_case->name, std::string(to_string(r.status)) + ": " + r.reason});
            continue;
        }
        const PairedRatio ratio = paired_ratio(r);
        const std::string ratio_cell = ratio.available ? format_number(ratio.median, 3) + "x" : ratio.why_none();
        const std::string range_cell = ratio.available ? format_number(ratio.min, 3) + "-" + format_number(ratio.max, 3)
                                                       : "-";
        cells.push_back({row.benchmark_case->name, r.operation, format_number(r.raw, 3), format_number(r.cudyn, 3),
                         ratio_cell, range_cell, r.unit, std::to_string(r.iterations),
                         std::to_string(r.samples) + " " + r.statistic});
    }
    // Widths from the complete rows; a skipped row's message spills over the
    // columns after the case name.
    std::vector<std::size_t> widths(headings.size());
    for (std::size_t c = 0; c < headings.size(); ++c) widths[c] = headings[c].size();
    for (const auto& line : cells)
        if (line.size() == headings.size())
            for (std::size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
    for (const auto& line : cells) widths[0] = std::max(widths[0], line[0].size());

    const auto is_numeric = [](std::size_t column) { return column >= 2 && column <= 5; };
    const auto print_line = [&](const std::vector<std::string>& line) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            if (c) text += "  ";
            const bool last = c + 1 == line.size();
            const std::size_t pad = line[c].size() < widths[c] ? widths[c] - line[c].size() : 0;
            if (is_numeric(c)) text += std::string(pad, ' ') + line[c];
            else text += line[c] + (last ? "" : std::string(pad, ' '));
        }
        std::printf("%s\n", text.c_str());
    };
    std::printf("\n");
    print_line(headings);
    std::size_t total = 0;
    for (std::size_t w : widths) total += w;
    std::printf("%s\n", std::string(total + 2 * (widths.size() - 1), '-').c_str());
    for (const auto& line : cells) print_line(line);

    bool any_note = false;
    for (const Row& row : rows)
        for (const std::string& note : row.result.notes) {
            if (!any_note) std::printf("\n");
            any_note = true;
            std::printf("note: %s: %s\n", row.benchmark_case->name, note.c_str());
        }
}

bool write_json(const std::string& path, const Options& options, const DriverSummary& driver,
                const std::vector<Row>& rows) {
    std::string out = "{\n";
    out += "  \"tool\": \"cudyn-bench\",\n";
    out += "  \"version\": " + json_string(CUDYN_BENCH_VERSION) + ",\n";
    out += "  \"linkage\": " + json_string(CUDYN_BENCH_LINKAGE) + ",\n";
    out += "  \"compiler\": " + json_string(compiler_name()) + ",\n";
    out += "  \"timestamp\": " + json_string(utc_timestamp()) + ",\n";
    out += "  \"host\": " + json_string(host_name()) + ",\n";
    out += "  \"filter\": " + json_string(options.filter) + ",\n";
    out += "  \"cases_named\": [";
    for (std::size_t n = 0; n < options.names.size(); ++n) out += (n ? ", " : "") + json_string(options.names[n]);
    out += "],\n";
    out += "  \"settings\": {\"repetitions\": " + std::to_string(options.settings.repetitions) +
           ", \"iterations\": " + std::to_string(options.settings.iterations) +
           ", \"processes\": " + std::to_string(options.settings.processes) + "},\n";
    if (driver.queried) {
        const LoadReport& report = cudyn::load_report();
        out += "  \"driver\": {\"state\": " + json_string(cudyn::to_string(report.state)) +
               ", \"usable\": " + (driver.usable ? "true" : "false") +
               ", \"requested_path\": " + json_string(report.requested_path) +
               ", \"library_path\": " + json_string(report.library_path) +
               ", \"driver_version\": " + std::to_string(report.driver_version) +
               ", \"device0\": " + json_string(driver.device_name) +
               ", \"reason\": " + json_string(driver.reason) + "},\n";
    } else {
        out += "  \"driver\": null,\n";
    }
    out += "  \"cases\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const CaseResult& r = rows[i].result;
        const bool ok = r.status == Status::Ok;
        const double nan = std::nan("");
        out += i ? ",\n    {" : "\n    {";
        out += "\"name\": " + json_string(rows[i].benchmark_case->name);
        out += ", \"status\": " + json_string(to_string(r.status));
        out += ", \"reason\": " + json_string(r.reason);
        out += ", \"operation\": " + json_string(r.operation);
        out += ", \"raw\": " + json_number(ok ? r.raw : nan);
        out += ", \"cudyn\": " + json_number(ok ? r.cudyn : nan);
        // The ratio is the paired one; where there is none, null and why.
        const PairedRatio ratio = paired_ratio(r);
        out += ", \"ratio\": " + json_number(ok && ratio.available ? ratio.median : nan);
        out += ", \"ratio_note\": " + json_string(ok ? ratio.why_none() : "");
        out += ", \"ratio_min\": " + json_number(ok && ratio.available ? ratio.min : nan);
        out += ", \"ratio_q1\": " + json_number(ok && ratio.available ? ratio.q1 : nan);
        out += ", \"ratio_q3\": " + json_number(ok && ratio.available ? ratio.q3 : nan);
        out += ", \"ratio_max\": " + json_number(ok && ratio.available ? ratio.max : nan);
        out += std::string(", \"bimodal\": ") + (ok && (ratio.raw_bimodal || ratio.cudyn_bimodal) ? "true" : "false");
        out += std::string(", \"raw_bimodal\": ") + (ok && ratio.raw_bimodal ? "true" : "false");
        out += std::string(", \"cudyn_bimodal\": ") + (ok && ratio.cudyn_bimodal ? "true" : "false");
        out += ", \"round_ratios\": " + json_numbers(ok ? ratio.rounds : std::vector<double>{});
        out += ", \"unit\": " + json_string(r.unit);
        out += ", \"iterations\": " + std::to_string(r.iterations);
        out += ", \"samples\": " + std::to_string(r.samples);
        out += ", \"statistic\": " + json_string(r.statistic);
        for (const auto& [key, value] : r.extra) out += ", " + json_string(key) + ": " + json_number(value);
        out += ", \"raw_samples\": " + json_numbers(r.raw_samples);
        out += ", \"cudyn_samples\": " + json_numbers(r.cudyn_samples);
        out += ", \"notes\": [";
        for (std::size_t n = 0; n < r.notes.size(); ++n) out += (n ? ", " : "") + json_string(r.notes[n]);
        out += "]}";
    }
    out += rows.empty() ? "]\n}\n" : "\n  ]\n}\n";

    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) return false;
    file << out;
    file.close();
    return static_cast<bool>(file);
}

int run_as_child(const char* name) {
    for (const Child& child : child_registry())
        if (std::strcmp(child.name, name) == 0) return child.function();
    std::fprintf(stderr, "cudyn-bench: no child named '%s'\n", name);
    return 2;
}

}  // namespace

// --- public helpers --------------------------------------------------------------

CaseResult skipped(std::string reason) {
    CaseResult result;
    result.status = Status::Skipped;
    result.reason = std::move(reason);
    return result;
}

CaseResult failed(std::string reason) {
    CaseResult result;
    result.status = Status::Failed;
    result.reason = std::move(reason);
    return result;
}

CaseRegistrar::CaseRegistrar(const Case& benchmark_case) { case_registry().push_back(benchmark_case); }

const Case* find_case(const char* name) {
    for (const Case& benchmark_case : case_registry())
        if (std::strcmp(benchmark_case.name, name) == 0) return &benchmark_case;
    return nullptr;
}

ChildRegistrar::ChildRegistrar(const char* name, ChildFunction function) {
    child_registry().push_back({name, function});
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const std::size_t middle = values.size() / 2;
    return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

double minimum(const std::vector<double>& values) {
    return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

Spread spread(std::vector<double> samples) {
    Spread out;
    if (samples.empty()) return out;
    std::sort(samples.begin(), samples.end());
    out.min = samples.front();
    out.max = samples.back();
    out.median = median(samples);
    if (samples.size() >= 4 && out.median > 0) {
        for (std::size_t i = 2; i + 1 < samples.size(); ++i) {  // a gap with two or more samples on each side
            if ((samples[i] - samples[i - 1]) > 0.25 * out.median) out.bimodal = true;
        }
    }
    return out;
}

namespace {

// The value at fraction `at` (0..1) of sorted `values`, interpolating
// between neighbours.
double quantile(const std::vector<double>& sorted, double at) {
    if (sorted.empty()) return 0;
    const double position = at * static_cast<double>(sorted.size() - 1);
    const std::size_t below = static_cast<std::size_t>(position);
    if (below + 1 >= sorted.size()) return sorted.back();
    const double fraction = position - static_cast<double>(below);
    return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

}  // namespace

PairedRatio paired_ratio(const CaseResult& result) {
    PairedRatio out;
    const std::vector<double>& raw = result.raw_samples;
    const std::vector<double>& cudyn = result.cudyn_samples;
    if (raw.empty() || raw.size() != cudyn.size()) return out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (!(raw[i] > 0)) return out;  // a round without a raw time has no ratio
        out.rounds.push_back(cudyn[i] / raw[i]);
    }
    out.paired = true;
    out.raw_bimodal = spread(raw).bimodal;
    out.cudyn_bimodal = spread(cudyn).bimodal;
    out.available = !out.raw_bimodal && !out.cudyn_bimodal;
    std::vector<double> sorted = out.rounds;
    std::sort(sorted.begin(), sorted.end());
    out.median = median(sorted);
    out.min = sorted.front();
    out.max = sorted.back();
    out.q1 = quantile(sorted, 0.25);
    out.q3 = quantile(sorted, 0.75);
    return out;
}

std::string PairedRatio::why_none() const {
    if (available) return "";
    if (!paired) return "unpaired: no ratio";
    return "bimodal: no ratio";
}

double CaseResult::ratio() const {
    const PairedRatio paired = paired_ratio(*this);
    return paired.available ? paired.median : 0;
}

namespace {

// What a case's samples say beyond its one statistic: each side's spread, the
// rounds' ratios, and which side was bimodal where there is no ratio.
void add_spread_notes(CaseResult& result) {
    if (result.raw_samples.empty() || result.cudyn_samples.empty()) return;
    const Spread raw = spread(result.raw_samples);
    const Spread cudyn = spread(result.cudyn_samples);
    const PairedRatio ratio = paired_ratio(result);
    char line[320];
    std::snprintf(line, sizeof line, "spread over %zu rounds: raw %.4g / %.4g / %.4g, cudyn %.4g / %.4g / %.4g (min / median / max %s)",
                  result.raw_samples.size(), raw.min, raw.median, raw.max, cudyn.min, cudyn.median, cudyn.max,
                  result.unit.c_str());
    result.notes.push_back(line);
    if (ratio.paired) {
        std::snprintf(line, sizeof line,
                      "the rounds' ratios (cudyn/raw of each round): min %.3f, quartiles %.3f / %.3f / %.3f, max %.3f",
                      ratio.min, ratio.q1, ratio.median, ratio.q3, ratio.max);
        result.notes.push_back(line);
    } else {
        result.notes.push_back("raw and cudyn rounds do not pair up (" + std::to_string(result.raw_samples.size()) +
                               " raw, " + std::to_string(result.cudyn_samples.size()) + " cudyn): no ratio");
    }
    if (raw.bimodal || cudyn.bimodal)
        result.notes.push_back(std::string("bimodal: no ratio (the ") + (raw.bimodal ? "raw" : "") +
                               (raw.bimodal && cudyn.bimodal ? " and the " : "") + (cudyn.bimodal ? "cudyn" : "") +
                               " rounds fall in two separate groups)");
    result.extra.push_back({"raw_min", raw.min});
    result.extra.push_back({"raw_max", raw.max});
    result.extra.push_back({"cudyn_min", cudyn.min});
    result.extra.push_back({"cudyn_max", cudyn.max});
}

}  // namespace

ChildOutcome run_child(const std::string& name) {
    ChildOutcome outcome;
    int pipe_ends[2];
    if (::pipe(pipe_ends) != 0) {
        outcome.error = std::string("pipe: ") + std::strerror(errno);
        return outcome;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclose(&actions, pipe_ends[0]);
    posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_ends[1]);

    std::string program = "/proc/self/exe";
    std::string flag = "--child";
    std::string child_name = name;
    char* child_argv[] = {program.data(), flag.data(), child_name.data(), nullptr};
    pid_t pid = 0;
    const int spawn_error = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, child_argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_ends[1]);
    if (spawn_error != 0) {
        ::close(pipe_ends[0]);
        outcome.error = "could not start " + program + ": " + std::strerror(spawn_error);
        return outcome;
    }

    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(pipe_ends[0], buffer, sizeof buffer);
        if (got > 0) outcome.output.append(buffer, static_cast<std::size_t>(got));
        else if (got == 0 || errno != EINTR) break;
    }
    ::close(pipe_ends[0]);

    int wait_status = 0;
    while (::waitpid(pid, &wait_status, 0) < 0) {
        if (errno != EINTR) {
            outcome.error = std::string("waitpid: ") + std::strerror(errno);
            return outcome;
        }
    }
    if (WIFEXITED(wait_status)) {
        outcome.exit_status = WEXITSTATUS(wait_status);
    } else if (WIFSIGNALED(wait_status)) {
        outcome.error = "child '" + name + "' died of signal " + std::to_string(WTERMSIG(wait_status));
    } else {
        outcome.error = "child '" + name + "' did not exit normally";
    }
    return outcome;
}

int run_harness(int argc, char** argv) {
    // A child measures a fresh process: nothing may touch the driver before it.
    if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return run_as_child(argv[2]);

    Options options;
    if (!parse_options(argc, argv, options)) return 2;
    if (options.help) {
        print_usage(stdout);
        return 0;
    }
    if (options.overhead) return run_overhead(options.settings, options.filter);

    // A --case that names no case is a typo, not an empty selection.
    for (const std::string& name : options.names) {
        const bool known = std::any_of(case_registry().begin(), case_registry().end(),
                                       [&](const Case& c) { return name == c.name; });
        if (!known) {
            std::fprintf(stderr, "cudyn-bench: no case named '%s' (see --list)\n", name.c_str());
            return 2;
        }
    }
    std::vector<const Case*> selected;
    for (const Case& benchmark_case : case_registry()) {
        const bool by_filter = !options.filter.empty() && std::strstr(benchmark_case.name, options.filter.c_str()) != nullptr;
        const bool by_name = std::find(options.names.begin(), options.names.end(), benchmark_case.name) != options.names.end();
        const bool everything = options.filter.empty() && options.names.empty();
        if (everything || by_filter || by_name) selected.push_back(&benchmark_case);
    }

    if (options.list) {
        std::size_t width = 0;
        for (const Case* c : selected) width = std::max(width, std::strlen(c->name));
        for (const Case* c : selected)
            std::printf("%-*s  %s%s\n", static_cast<int>(width), c->name, c->description,
                        c->needs_driver ? " [needs driver]" : "");
        return 0;
    }
    if (selected.empty()) {
        std::fprintf(stderr, "cudyn-bench: no case matches --filter '%s' (see --list)\n", options.filter.c_str());
        return 2;
    }

    DriverSummary driver;
    if (std::any_of(selected.begin(), selected.end(), [](const Case* c) { return c->needs_driver; }))
        driver = query_driver();
    print_header(driver);
    std::fflush(stdout);

    std::vector<Row> rows;
    bool any_failed = false;
    for (std::size_t i = 0; i < selected.size(); ++i) {
        const Case& benchmark_case = *selected[i];
        std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, selected.size(), benchmark_case.name);
        CaseResult result = benchmark_case.needs_driver && !driver.usable ? skipped(driver.reason)
                                                                          : benchmark_case.run(options.settings);
        if (result.status != Status::Ok) {
            std::printf("%s: %s: %s\n", benchmark_case.name, to_string(result.status), result.reason.c_str());
            std::fflush(stdout);
        }
        any_failed = any_failed || result.status == Status::Failed;
        if (result.status == Status::Ok) add_spread_notes(result);
        rows.push_back({&benchmark_case, std::move(result)});
    }

    print_table(rows);
    std::fflush(stdout);
    if (!write_json(options.json_path, options, driver, rows)) {
        std::fprintf(stderr, "cudyn-bench: could not write %s: %s\n", options.json_path.c_str(), std::strerror(errno));
        return 1;
    }
    std::printf("\nresults written to %s\n", options.json_path.c_str());
    return any_failed ? 1 : 0;
}

std::string format(const char* pattern, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, pattern, value);
    return buffer;
}

void add_target_note(CaseResult& result, const char* what, double limit, bool higher_is_better) {
    const PairedRatio paired = paired_ratio(result);
    if (!paired.available) {
        result.notes.push_back(std::string(what) + ": " + paired.why_none() + ", target " +
                               (higher_is_better ? ">= " : "<= ") + format("%.2f", limit) + " not judged");
        return;
    }
    const double ratio = paired.median;
    const bool met = higher_is_better ? ratio >= limit : ratio <= limit;
    result.notes.push_back(std::string(what) + ": cudyn/raw " + format("%.3f", ratio) + ", target " +
                           (higher_is_better ? ">= " : "<= ") + format("%.2f", limit) + ": " +
                           (met ? "met" : "NOT met"));
}

}  // namespace cudyn::bench

int main(int argc, char** argv) { return cudyn::bench::run_harness(argc, argv); }
