// cudyn-bench — inter-process sharing cases: the legacy IPC handle of
// cuMemAlloc memory exported here and opened in a fresh process (a process
// cannot open its own handle), through cudyn against the same entries called
// raw (the table's pointers, no checks, no RAII), in the same run.
// bench/README.md lists the cases and their targets.
#include "harness.hpp"

#include <sys/resource.h>

#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/device/primary_context.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::bench {

namespace {

constexpr std::size_t kBytes = std::size_t{64} << 20;
constexpr const char* kDescriptorVariable = "CUDYN_BENCH_IPC_DESCRIPTOR";
constexpr const char* kOpensVariable = "CUDYN_BENCH_IPC_OPENS";

// Device 0's context (current for the run) and one cuMemAlloc allocation.
struct IpcSetup {
    PrimaryContext context;
    DeviceBuffer<std::uint8_t> buffer;
};

Result<IpcSetup> make_setup() {
    auto device = Device::get(0);
    if (!device) return device.error();
    auto context = PrimaryContext::activate(*device);
    if (!context) return context.error();
    auto buffer = DeviceBuffer<std::uint8_t>::allocate(kBytes);
    if (!buffer) return buffer.error();
    return IpcSetup{std::move(*context), std::move(*buffer)};
}

const IpcSetup* setup(std::string& why) {
    static std::optional<Result<IpcSetup>> made;
    if (!made) made.emplace(make_setup());
    if (made->has_value()) return &made->value();
    why = made->error().describe();
    return nullptr;
}

// =============================================================================
// 1. Export: cuIpcGetMemHandle of the base allocation, and of a sub-range
// =============================================================================

// compare_loops over one operation per side, each answering whether it worked.
template <typename Raw, typename Cudyn>
CaseResult compare_calls(const Settings& settings, Raw raw_once, Cudyn cudyn_once) {
    const auto loop = [](auto& once) {
        return [&once](std::uint64_t n) {
            std::uint64_t wrong = 0;
            for (std::uint64_t i = 0; i < n; ++i) wrong += once() ? 0 : 1;
            return wrong;
        };
    };
    CaseResult result = compare_loops(settings, 20000, loop(raw_once), loop(cudyn_once));
    result.unit = "ns/call";
    return result;
}

CaseResult get_mem_handle(const Settings& settings) {
    std::string why;
    const IpcSetup* s = setup(why);
    if (s == nullptr) return skipped(why);
    const DriverTable& cu = driver();
    const CUdeviceptr base = s->buffer.device_address();
    CaseResult result = compare_calls(
        settings,
        [&] {
            CUipcMemHandle handle;
            const bool worked = cu.cuIpcGetMemHandle_v4010(&handle, base) == CUDA_SUCCESS;
            keep(&handle);
            return worked;
        },
        [&] {
            auto descriptor = export_ipc_memory(s->buffer);
            keep(&descriptor);
            return descriptor.has_value();
        });
    if (result.status != Status::Ok) return result;
    result.operation = "cuIpcGetMemHandle, 64 MiB cuMemAlloc allocation";
    result.notes.push_back("cudyn: the handle plus the descriptor (offset, size, pid, process token); raw H200 "
                           "reference: ~8 us per cuIpcGetMemHandle");
    add_target_note(result, "get-mem-handle", 1.05);
    return result;
}

CaseResult export_range(const Settings& settings) {
    std::string why;
    const IpcSetup* s = setup(why);
    if (s == nullptr) return skipped(why);
    const DriverTable& cu = driver();
    const CUdeviceptr inside = s->buffer.device_address() + kBytes / 2;
    CaseResult result = compare_calls(
        settings,
        [&] {
            CUipcMemHandle handle;
            CUdeviceptr base = 0;
            std::size_t size = 0;
            const bool worked = cu.cuMemGetAddressRange_v3020(&base, &size, inside) == CUDA_SUCCESS &&
                                cu.cuIpcGetMemHandle_v4010(&handle, base) == CUDA_SUCCESS;
            keep(&handle);
            return worked;
        },
        [&] {
            auto descriptor = export_ipc_memory(inside, 4096);
            keep(&descriptor);
            return descriptor.has_value();
        });
    if (result.status != Status::Ok) return result;
    result.operation = "cuMemGetAddressRange + cuIpcGetMemHandle of a sub-range";
    add_target_note(result, "export-range", 1.05);
    return result;
}

const CaseRegistrar get_mem_handle_case({"ipc/get-mem-handle",
                                         "IpcMemoryDescriptor::export_buffer vs cuIpcGetMemHandle", true,
                                         get_mem_handle});
const CaseRegistrar export_range_case({"ipc/export-range",
                                       "IpcMemoryDescriptor::export_range vs cuMemGetAddressRange + cuIpcGetMemHandle",
                                       true, export_range});

// =============================================================================
// 2. Open, in a fresh process
// =============================================================================

template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string text;
    for (std::uint8_t byte : bytes) {
        text += digits[byte >> 4];
        text += digits[byte & 15];
    }
    return text;
}

template <std::size_t N>
bool from_hex(const char* text, std::array<std::uint8_t, N>& bytes) {
    const auto nibble = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
    if (text == nullptr || std::string(text).size() != 2 * bytes.size()) return false;
    for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<std::uint8_t>(nibble(text[2 * i]) << 4 | nibble(text[2 * i + 1]));
    return true;
}

// The child: times `opens` raw and `opens` cudyn opens, in alternating blocks
// of 10, each open closed again (untimed) before the next.
int child_open() {
    IpcMemoryDescriptor::Bytes bytes{};
    if (!from_hex(std::getenv(kDescriptorVariable), bytes)) {
        std::printf("no descriptor in %s\n", kDescriptorVariable);
        return 1;
    }
    auto descriptor = IpcMemoryDescriptor::from_bytes(bytes.data(), bytes.size());
    if (!descriptor) {
        std::printf("%s\n", descriptor.error().describe().c_str());
        return 1;
    }
    auto device = Device::get(0);
    if (!device) return std::printf("%s\n", device.error().describe().c_str()), 1;
    auto context = PrimaryContext::activate(*device);
    if (!context) return std::printf("%s\n", context.error().describe().c_str()), 1;
    const DriverTable& cu = driver();
    const bool v2 = cu.cuIpcOpenMemHandle_v11000 != nullptr;
    const CUipcMemHandle raw_handle = descriptor->handle().to_cu();
    const int opens = std::max(10, std::atoi(std::getenv(kOpensVariable) ? std::getenv(kOpensVariable) : "200"));

    std::vector<double> raw_us, cudyn_us;
    for (int block = 0; block <= opens / 10; ++block) {  // block 0: warm-up
        for (int side = 0; side < 2; ++side) {
            const bool raw_side = (side == 0) == (block % 2 == 0);
            for (int i = 0; i < 10; ++i) {
                if (raw_side) {
                    CUdeviceptr pointer = 0;
                    const auto start = Clock::now();
                    const CUresult rc = v2 ? cu.cuIpcOpenMemHandle_v11000(&pointer, raw_handle,
                                                                          CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
                                           : cu.cuIpcOpenMemHandle_v4010(&pointer, raw_handle,
                                                                         CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
                    const auto end = Clock::now();
                    if (rc != CUDA_SUCCESS) return std::printf("raw open: %d\n", static_cast<int>(rc)), 1;
                    if (block > 0) raw_us.push_back(elapsed_ns(start, end) / 1000.0);
                    if (cu.cuIpcCloseMemHandle_v4010(pointer) != CUDA_SUCCESS) return std::printf("raw close\n"), 1;
                } else {
                    const auto start = Clock::now();
                    auto opened = import_ipc_memory(*descriptor);
                    const auto end = Clock::now();
                    if (!opened) return std::printf("%s\n", opened.error().describe().c_str()), 1;
                    if (block > 0) cudyn_us.push_back(elapsed_ns(start, end) / 1000.0);
                    if (auto closed = opened->close(); !closed)
                        return std::printf("%s\n", closed.error().describe().c_str()), 1;
                }
            }
        }
    }
    std::printf("result raw_us=%.6f cudyn_us=%.6f raw_min_us=%.6f cudyn_min_us=%.6f opens=%zu abi=%s\n",
                median(raw_us), median(cudyn_us), minimum(raw_us), minimum(cudyn_us), raw_us.size(),
                v2 ? "v2" : "4010");
    for (double value : raw_us) std::printf("raw %.6f\n", value);
    for (double value : cudyn_us) std::printf("cudyn %.6f\n", value);
    return 0;
}

const ChildRegistrar open_child("ipc-open", child_open);

double field(const std::string& line, const std::string& key) {
    const auto at = line.find(key + "=");
    return at == std::string::npos ? 0 : std::strtod(line.c_str() + at + key.size() + 1, nullptr);
}

CaseResult open_mem_handle(const Settings& settings) {
    std::string why;
    const IpcSetup* s = setup(why);
    if (s == nullptr) return skipped(why);
    auto descriptor = export_ipc_memory(s->buffer);
    if (!descriptor) return failed(descriptor.error().describe());
    ::setenv(kDescriptorVariable, to_hex(descriptor->to_bytes()).c_str(), 1);
    ::setenv(kOpensVariable, std::to_string(settings.value_or_iterations(200)).c_str(), 1);
    const ChildOutcome outcome = run_child("ipc-open");
    ::unsetenv(kDescriptorVariable);
    ::unsetenv(kOpensVariable);
    if (!outcome.error.empty()) return failed(outcome.error);
    if (outcome.exit_status != 0)
        return outcome.exit_status == kChildSkip ? skipped(outcome.output)
                                                 : failed("child ipc-open exited " +
                                                          std::to_string(outcome.exit_status) + ": " + outcome.output);
    CaseResult result;
    std::istringstream lines(outcome.output);
    std::string line;
    std::string summary;
    while (std::getline(lines, line)) {
        if (line.rfind("result ", 0) == 0) summary = line;
        else if (line.rfind("raw ", 0) == 0) result.raw_samples.push_back(std::strtod(line.c_str() + 4, nullptr));
        else if (line.rfind("cudyn ", 0) == 0) result.cudyn_samples.push_back(std::strtod(line.c_str() + 6, nullptr));
    }
    if (summary.empty()) return failed("child ipc-open printed no result: " + outcome.output);
    result.operation = std::string("cuIpcOpenMemHandle") + (summary.find("abi=v2") != std::string::npos ? "_v2" : "") +
                       " in a fresh process, 64 MiB";
    result.raw = field(summary, "raw_us");
    result.cudyn = field(summary, "cudyn_us");
    result.unit = "us/open";
    result.iterations = 1;
    result.samples = static_cast<int>(result.raw_samples.size());
    result.statistic = "median";
    result.extra = {{"raw_min_us", field(summary, "raw_min_us")}, {"cudyn_min_us", field(summary, "cudyn_min_us")}};
    result.notes.push_back("cudyn's open also asks for the current context, keeps the one-open-per-context record "
                           "and checks the opened size (cuMemGetAddressRange); raw H200 reference: ~110 us");
    add_target_note(result, "open-mem-handle", 1.05);
    return result;
}

const CaseRegistrar open_case({"ipc/open-mem-handle",
                               "ImportedIpcMemory::open vs cuIpcOpenMemHandle of another process's allocation (a child)",
                               true, open_mem_handle});

// =============================================================================
// The first open of a process: nothing of cudyn's warmed up yet
// =============================================================================

constexpr const char* kSideVariable = "CUDYN_BENCH_IPC_SIDE";

// Minor page faults of the process so far.
long minor_faults() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

// The child: after its context is current, times the first open of the
// process, raw or through cudyn (one side per process), and prints it.
int child_first_open() {
    IpcMemoryDescriptor::Bytes bytes{};
    if (!from_hex(std::getenv(kDescriptorVariable), bytes)) return std::printf("no descriptor\n"), 1;
    auto descriptor = IpcMemoryDescriptor::from_bytes(bytes.data(), bytes.size());
    if (!descriptor) return std::printf("%s\n", descriptor.error().describe().c_str()), 1;
    auto device = Device::get(0);
    if (!device) return std::printf("%s\n", device.error().describe().c_str()), 1;
    auto context = PrimaryContext::activate(*device);
    if (!context) return std::printf("%s\n", context.error().describe().c_str()), 1;
    const DriverTable& cu = driver();
    const std::string side = std::getenv(kSideVariable) != nullptr ? std::getenv(kSideVariable) : "";
    const CUipcMemHandle raw_handle = descriptor->handle().to_cu();
    double us = 0;
    const long faults_before = minor_faults();
    if (side != "cudyn") {
        // "raw": the open alone; "raw-checked": also the size check cudyn
        // makes (cuMemGetAddressRange of the opened base), for the breakdown.
        CUdeviceptr pointer = 0;
        CUdeviceptr base = 0;
        std::size_t size = 0;
        const auto start = Clock::now();
        CUresult rc = cu.cuIpcOpenMemHandle_v11000 != nullptr
                          ? cu.cuIpcOpenMemHandle_v11000(&pointer, raw_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
                          : cu.cuIpcOpenMemHandle_v4010(&pointer, raw_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (rc == CUDA_SUCCESS && side == "raw-checked") rc = cu.cuMemGetAddressRange_v3020(&base, &size, pointer);
        us = elapsed_ns(start, Clock::now()) / 1000.0;
        if (rc != CUDA_SUCCESS) return std::printf("raw open: %d\n", static_cast<int>(rc)), 1;
        (void)cu.cuIpcCloseMemHandle_v4010(pointer);
    } else {
        const auto start = Clock::now();
        auto opened = import_ipc_memory(*descriptor);
        us = elapsed_ns(start, Clock::now()) / 1000.0;
        if (!opened) return std::printf("%s\n", opened.error().describe().c_str()), 1;
    }
    // Page faults inside the timed call (and the close of the raw side):
    // what a cold process pays besides the driver.
    std::printf("result us=%.6f faults=%ld\n", us, minor_faults() - faults_before);
    return 0;
}

const ChildRegistrar first_open_child("ipc-first-open", child_first_open);

// Runs `child` once per side per round, `processes` counted rounds after one
// that warms the page cache, the order of the three sides rotating each
// round; the side's name is in kSideVariable. `take(side, output)` gets each
// counted child's output. The failure of a child, or empty.
template <typename Take>
std::string run_side_rounds(const char* child, const char* const (&sides)[3], int processes, Take take) {
    for (int round = 0; round <= processes; ++round) {
        for (int k = 0; k < 3; ++k) {
            const char* side = sides[(round + k) % 3];
            ::setenv(kSideVariable, side, 1);
            const ChildOutcome outcome = run_child(child);
            if (!outcome.error.empty() || outcome.exit_status != 0)
                return "child " + std::string(child) + " (" + side + "): " + outcome.error + outcome.output;
            if (round != 0) take(std::string(side), outcome.output);
        }
    }
    return {};
}

CaseResult first_open(const Settings& settings) {
    std::string why;
    const IpcSetup* s = setup(why);
    if (s == nullptr) return skipped(why);
    auto descriptor = export_ipc_memory(s->buffer);
    if (!descriptor) return failed(descriptor.error().describe());
    ::setenv(kDescriptorVariable, to_hex(descriptor->to_bytes()).c_str(), 1);
    const int processes = settings.value_or_processes(15);
    CaseResult result;
    std::vector<double> checked;
    std::vector<double> raw_faults;
    std::vector<double> cudyn_faults;
    const char* const sides[] = {"raw", "cudyn", "raw-checked"};
    const std::string error =
        run_side_rounds("ipc-first-open", sides, processes, [&](const std::string& side, const std::string& output) {
            const double us = field(output, "us");
            const double faults = field(output, "faults");
            if (side == "raw") {
                result.raw_samples.push_back(us);
                raw_faults.push_back(faults);
            } else if (side == "cudyn") {
                result.cudyn_samples.push_back(us);
                cudyn_faults.push_back(faults);
            } else {
                checked.push_back(us);
            }
        });
    if (!error.empty()) {
        ::unsetenv(kDescriptorVariable);
        ::unsetenv(kSideVariable);
        return failed(error);
    }
    char line[200];
    std::snprintf(line, sizeof line,
                  "raw open + the size check cudyn makes (cuMemGetAddressRange): median %.2f us (%.3fx of the raw open)",
                  median(checked), median(checked) / median(result.raw_samples));
    result.notes.push_back(line);
    std::snprintf(line, sizeof line, "minor page faults inside the timed call, median: raw %.0f, cudyn %.0f",
                  median(raw_faults), median(cudyn_faults));
    result.notes.push_back(line);
    ::unsetenv(kDescriptorVariable);
    ::unsetenv(kSideVariable);
    result.operation = "the first open of a fresh process (after its context is current), one per process";
    result.raw = median(result.raw_samples);
    result.cudyn = median(result.cudyn_samples);
    result.unit = "us/open";
    result.iterations = 1;
    result.samples = processes;
    result.statistic = "median";
    add_target_note(result, "first open", 1.05);
    return result;
}

const CaseRegistrar first_open_case({"ipc/first-open",
                                     "the first ImportedIpcMemory::open of a fresh process vs the first raw cuIpcOpenMemHandle, "
                                     "one open per process, 15 processes per side",
                                     true, first_open});

// =============================================================================
// 4. A pool pointer imported in a fresh process, against a legacy open
// =============================================================================

constexpr const char* kPoolFdVariable = "CUDYN_BENCH_POOL_FD";
constexpr const char* kPoolInfoVariable = "CUDYN_BENCH_POOL_INFO";
constexpr const char* kPoolPointerVariable = "CUDYN_BENCH_POOL_POINTER";

// The child: imports the exporter's pool from the inherited descriptor
// (untimed), then times the first pointer import of the process, raw
// (cuMemPoolImportPointer) or through cudyn (import_pool_pointer); side
// "legacy" times the first raw cuIpcOpenMemHandle instead.
int child_pool_import() {
    const std::string side = std::getenv(kSideVariable) != nullptr ? std::getenv(kSideVariable) : "";
    auto device = Device::get(0);
    if (!device) return std::printf("%s\n", device.error().describe().c_str()), 1;
    auto context = PrimaryContext::activate(*device);
    if (!context) return std::printf("%s\n", context.error().describe().c_str()), 1;
    const DriverTable& cu = driver();
    double us = 0;
    if (side == "legacy") {
        IpcMemoryDescriptor::Bytes bytes{};
        if (!from_hex(std::getenv(kDescriptorVariable), bytes)) return std::printf("no descriptor\n"), 1;
        auto descriptor = IpcMemoryDescriptor::from_bytes(bytes.data(), bytes.size());
        if (!descriptor) return std::printf("%s\n", descriptor.error().describe().c_str()), 1;
        const CUipcMemHandle handle = descriptor->handle().to_cu();
        CUdeviceptr pointer = 0;
        const auto start = Clock::now();
        const CUresult rc = cu.cuIpcOpenMemHandle_v11000(&pointer, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        us = elapsed_ns(start, Clock::now()) / 1000.0;
        if (rc != CUDA_SUCCESS) return std::printf("raw open: %d\n", static_cast<int>(rc)), 1;
        (void)cu.cuIpcCloseMemHandle_v4010(pointer);
        std::printf("result us=%.6f\n", us);
        return 0;
    }
    PoolInfo::Bytes info_bytes{};
    PoolPointerDescriptor::Bytes pointer_bytes{};
    const char* fd_text = std::getenv(kPoolFdVariable);
    if (fd_text == nullptr || !from_hex(std::getenv(kPoolInfoVariable), info_bytes) ||
        !from_hex(std::getenv(kPoolPointerVariable), pointer_bytes))
        return std::printf("no pool descriptors\n"), 1;
    auto info = PoolInfo::from_bytes(info_bytes.data(), info_bytes.size());
    auto shared = PoolPointerDescriptor::from_bytes(pointer_bytes.data(), pointer_bytes.size());
    if (!info || !shared) return std::printf("bad pool descriptors\n"), 1;
    // import_pool_fd closes the descriptor it is given: a duplicate, so the
    // inherited one stays for nobody (this process imports once).
    auto pool = import_pool_fd(PoolFdDescriptor{FileDescriptor(::dup(std::atoi(fd_text))), *info});
    if (!pool) return std::printf("%s\n", pool.error().describe().c_str()), 1;
    if (side == "raw") {
        CUmemPoolPtrExportData data = shared->handle().to_cu();
        CUdeviceptr pointer = 0;
        const auto start = Clock::now();
        const CUresult rc = cu.cuMemPoolImportPointer_v11020(&pointer, pool->handle(), &data);
        us = elapsed_ns(start, Clock::now()) / 1000.0;
        if (rc != CUDA_SUCCESS) return std::printf("raw import: %d\n", static_cast<int>(rc)), 1;
        (void)cu.cuMemFree_v3020(pointer);
    } else {
        const auto start = Clock::now();
        auto memory = import_pool_pointer(*pool, *shared);
        us = elapsed_ns(start, Clock::now()) / 1000.0;
        if (!memory) return std::printf("%s\n", memory.error().describe().c_str()), 1;
    }
    std::printf("result us=%.6f\n", us);
    return 0;
}

const ChildRegistrar pool_import_child("pool-first-import", child_pool_import);

CaseResult pool_first_import(const Settings& settings) {
    std::string why;
    const IpcSetup* s = setup(why);
    if (s == nullptr) return skipped(why);
    if (!has_entry(&DriverTable::cuMemPoolImportPointer_v11020) || !has_entry(&DriverTable::cuIpcOpenMemHandle_v11000))
        return skipped("the driver lacks the pool entries (11.2+) or the 11.0 IPC open");
    auto pool = MemoryPool::create(PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor));
    if (!pool) return skipped(pool.error().describe());
    auto stream = Stream::create();
    if (!stream) return failed(stream.error().describe());
    auto buffer = StreamOrderedBuffer<std::uint8_t>::allocate(*pool, kBytes, *stream);
    if (!buffer) return failed(buffer.error().describe());
    if (auto done = stream->synchronize(); !done) return failed(done.error().describe());
    auto exported = export_pool_fd(*pool);
    if (!exported) return failed(exported.error().describe());
    auto pointer = export_pool_pointer(*pool, *buffer);
    if (!pointer) return failed(pointer.error().describe());
    auto legacy = export_ipc_memory(s->buffer);
    if (!legacy) return failed(legacy.error().describe());
    // The children inherit a copy of the pool's descriptor.
    const int inherited = ::fcntl(exported->fd.get(), F_DUPFD, 3);
    if (inherited < 0) return failed("could not duplicate the pool's descriptor");
    ::setenv(kPoolFdVariable, std::to_string(inherited).c_str(), 1);
    ::setenv(kPoolInfoVariable, to_hex(exported->info.to_bytes()).c_str(), 1);
    ::setenv(kPoolPointerVariable, to_hex(pointer->to_bytes()).c_str(), 1);
    ::setenv(kDescriptorVariable, to_hex(legacy->to_bytes()).c_str(), 1);
    const int processes = settings.value_or_processes(15);
    CaseResult result;
    std::vector<double> legacy_us;
    const char* const sides[] = {"raw", "cudyn", "legacy"};
    const std::string error =
        run_side_rounds("pool-first-import", sides, processes, [&](const std::string& side, const std::string& output) {
            const double us = field(output, "us");
            if (side == "raw") result.raw_samples.push_back(us);
            else if (side == "cudyn") result.cudyn_samples.push_back(us);
            else legacy_us.push_back(us);
        });
    ::close(inherited);
    for (const char* variable : {kPoolFdVariable, kPoolInfoVariable, kPoolPointerVariable, kDescriptorVariable,
                                 kSideVariable})
        ::unsetenv(variable);
    if (!error.empty()) return failed(error);
    result.operation = "the first pool pointer import of a fresh process (pool imported before), 64 MiB";
    result.raw = median(result.raw_samples);
    result.cudyn = median(result.cudyn_samples);
    result.unit = "us/import";
    result.iterations = 1;
    result.samples = processes;
    result.statistic = "median";
    char line[200];
    std::snprintf(line, sizeof line,
                  "the first legacy cuIpcOpenMemHandle_v2 of a fresh process, same size: median %.2f us; cudyn's "
                  "pool pointer import takes %.3fx its time",
                  median(legacy_us), result.cudyn / median(legacy_us));
    result.notes.push_back(line);
    add_target_note(result, "first pool pointer import", 1.05);
    return result;
}

const CaseRegistrar pool_first_import_case({"pool/first-import",
                                            "import_pool_pointer in a fresh process vs raw cuMemPoolImportPointer, "
                                            "and vs a legacy cuIpcOpenMemHandle_v2, one per process",
                                            true, pool_first_import});

}  // namespace

}  // namespace cudyn::bench
