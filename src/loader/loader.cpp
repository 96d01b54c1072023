// cudyn loader — opens the driver once, resolves the table, writes the report.
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/driver_table.hpp"
#include "cudyn/loader/loader.hpp"
#include "core/internal.hpp"
#include "loader/internal.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

namespace cudyn {

namespace {

using ProcAddressV2 = PFN_cuGetProcAddress_v12000;  // with the status out-parameter
using ProcAddressV1 = PFN_cuGetProcAddress_v11030;

// Every entry is resolved in its legacy-default-stream form, explicitly:
// CU_GET_PROC_ADDRESS_DEFAULT would depend on a macro of whichever file is
// compiled.
constexpr cuuint64_t kResolveFlags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;

// The process-wide loader state. Allocated once and never destroyed, so
// destructors of cudyn objects that run during exit still find the table.
struct LoaderState {
    bool usable = false;  // written before detail::loaded_table is published
    DriverTable table;
    LoadReport report;

    std::mutex options_mutex;  // guards options and started
    LoaderOptions options;
    bool started = false;
};

LoaderState& loader_state() {
    static LoaderState* state = new LoaderState;
    return *state;
}

void** table_slot(DriverTable& table, const DriverEntryInfo& entry) {
    return reinterpret_cast<void**>(reinterpret_cast<char*>(&table) + entry.offset);
}

// cuGetProcAddress_v2 -> cuGetProcAddress -> dlsym of the ABI
// name, per symbol, asking for the base name at the version pinned from
// cudaTypedefs.h. A refusal at one step only moves this symbol to the next.
ResolvedVia resolve_entry(const loader::DynamicLibrary& library, ProcAddressV2 proc_address_v2,
                          ProcAddressV1 proc_address_v1, const DriverEntryInfo& entry, void** slot) {
    if (proc_address_v2 != nullptr) {
        void* function = nullptr;
        // The stub leaves the status unwritten: start from a failure value.
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        const CUresult rc = proc_address_v2(entry.name, &function, entry.version, kResolveFlags, &status);
        if (rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && function != nullptr) {
            *slot = function;
            return ResolvedVia::ProcAddressV2;
        }
    }
    if (proc_address_v1 != nullptr) {
        void* function = nullptr;
        const CUresult rc = proc_address_v1(entry.name, &function, entry.version, kResolveFlags);
        if (rc == CUDA_SUCCESS && function != nullptr) {
            *slot = function;
            return ResolvedVia::ProcAddress;
        }
    }
    if (void* function = library.symbol(entry.abi_symbol)) {
        *slot = function;
        return ResolvedVia::Dlsym;
    }
    return ResolvedVia::None;
}

void resolve_table(const loader::DynamicLibrary& library, LoaderState& state) {
    auto proc_address_v2 = reinterpret_cast<ProcAddressV2>(library.symbol("cuGetProcAddress_v2"));
    auto proc_address_v1 = reinterpret_cast<ProcAddressV1>(library.symbol("cuGetProcAddress"));
    state.report.has_proc_address_v2 = proc_address_v2 != nullptr;
    state.report.has_proc_address = proc_address_v1 != nullptr;
    for (std::size_t i = 0; i < driver_entry_count; ++i) {
        const DriverEntryInfo& entry = driver_entries[i];
        state.report.entry_points[i].via =
            resolve_entry(library, proc_address_v2, proc_address_v1, entry, table_slot(state.table, entry));
    }
}

// Every entry starts unresolved, so a report of a driver that was never
// opened still lists what would have been asked for.
void list_entries(LoadReport& report) {
    report.entry_points.reserve(driver_entry_count);
    for (const DriverEntryInfo& entry : driver_entries)
        report.entry_points.push_back({entry.name, entry.version, entry.abi_symbol, entry.required, ResolvedVia::None});
}

// Which path to open: options, then CUDYN_DRIVER_PATH, then the platform name.
// Returns false (and fills the report) when an override is refused.
bool choose_path(const LoaderOptions& options, LoadReport& report) {
    std::string source = "LoaderOptions::driver_path";
    std::string path = options.driver_path;
    if (path.empty()) {
        const char* from_environment = loader::secure_environment("CUDYN_DRIVER_PATH");
        if (from_environment != nullptr && *from_environment != '\0') {
            path = from_environment;
            source = "CUDYN_DRIVER_PATH";
        }
    }
    if (path.empty()) {
        report.requested_path = loader::default_driver_name();
        return true;
    }
    report.requested_path = path;
    if (!loader::is_absolute_path(path)) {
        report.state = LoadState::Refused;
        report.message = source + " must be an absolute path, got '" + path +
                         "'; a relative path would be searched for and could load an unintended "
                         "library, so nothing was loaded";
        return false;
    }
    return true;
}

void load_driver(LoaderState& state, const LoaderOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    LoadReport& report = state.report;
    list_entries(report);
    if (!choose_path(options, report)) return;

    std::string open_error;
    const loader::DynamicLibrary library = loader::DynamicLibrary::open(report.requested_path, open_error);
    if (!library.is_open()) {
        report.state = LoadState::NotFound;
        report.message = "could not open " + report.requested_path + ": " + open_error;
        return;
    }
    report.library_path = library.real_path();

    auto init = reinterpret_cast<PFN_cuInit_v2000>(library.symbol("cuInit"));
    auto get_version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(library.symbol("cuDriverGetVersion"));
    if (init == nullptr || get_version == nullptr) {
        report.state = LoadState::NotFound;
        report.message = report.library_path + " has no cuInit/cuDriverGetVersion: not a CUDA driver";
        return;
    }

    int version = 0;
    const CUresult version_result = get_version(&version);
    report.init_result = init(0);
    if (version_result == CUDA_SUCCESS) report.driver_version = version;
    resolve_table(library, state);

    if (version_result == CUDA_ERROR_STUB_LIBRARY || report.init_result == CUDA_ERROR_STUB_LIBRARY) {
        report.state = LoadState::Stub;
        report.message = report.library_path +
                         " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY): install an NVIDIA "
                         "driver, or make sure the stubs folder is not on the library path";
    } else if (report.init_result != CUDA_SUCCESS) {
        report.state = LoadState::InitFailed;
        report.message = std::string("cuInit(0) failed: ") + cuda_error_name(report.init_result) + ": " +
                         cuda_error_description(report.init_result);
        if (report.init_result == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE ||
            report.init_result == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
            report.message += " (a cuda-compat libcuda on the library path is a common cause; opened " +
                              report.library_path + ")";
    } else {
        report.state = LoadState::Loaded;
        state.usable = true;
    }
    report.load_milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

LoaderState& loaded_state() {
    LoaderState& state = loader_state();
    // The published table doubles as the "load finished" flag.
    if (detail::loaded_table.load(std::memory_order_acquire) == nullptr) {
        // Once per process through a function-local static, not std::call_once:
        // before glibc 2.34, std::call_once goes through pthread_once, which
        // libstdc++ references weakly. A program that links libcudyn.a but no
        // libpthread symbol of its own loses -lpthread to --as-needed (Debian
        // 11's g++ passes it by default), finds pthread_once null, and
        // std::call_once throws std::system_error(-1) at first use. A static's
        // initialization guard works with or without libpthread and blocks
        // concurrent first users the same way.
        static const bool loaded = [&state] {
            LoaderOptions options;
            {
                std::lock_guard<std::mutex> lock(state.options_mutex);
                state.started = true;
                options = state.options;
            }
            load_driver(state, options);
            if (state.usable) {
                detail::make_own_code_resident();
                detail::usable_table.store(&state.table, std::memory_order_release);
            }
            detail::loaded_table.store(&state.table, std::memory_order_release);
            return true;
        }();
        (void)loaded;
    }
    return state;
}

}  // namespace

namespace detail {
std::atomic<const DriverTable*> loaded_table{nullptr};
std::atomic<const DriverTable*> usable_table{nullptr};

const DriverTable& load_table_slow() { return loaded_state().table; }
}  // namespace detail

const LoadReport& load_report() { return loaded_state().report; }

Result<void> set_loader_options(const LoaderOptions& options) {
    constexpr detail::Operation kSetOptions{"set_loader_options"};
    if (!options.driver_path.empty() && !loader::is_absolute_path(options.driver_path))
        return kSetOptions.invalid("LoaderOptions::driver_path must be an absolute path, got '" +
                                   options.driver_path + "'");
    LoaderState& state = loader_state();
    std::lock_guard<std::mutex> lock(state.options_mutex);
    if (state.started)
        return kSetOptions.invalid("the driver was already loaded; loader options must be set before first use");
    state.options = options;
    return ok();
}

Result<void> driver_status() {
    const LoaderState& state = loaded_state();
    if (state.usable) return ok();
    return detail::driver_unusable_error();
}

namespace detail {

const DriverTable* usable_driver_slow() noexcept {
    const LoaderState& state = loaded_state();
    return state.usable ? &state.table : nullptr;
}

Error failed_call_error(CUresult result, const DriverEntryInfo& entry) {
    return Error::from_driver(result, entry.abi_symbol);
}

Error driver_unusable_error() {
    const LoadReport& report = loaded_state().report;
    Error error;
    error.message = report.message;
    switch (report.state) {
        case LoadState::Loaded: error.code = ErrorCode::Driver; error.message = "driver is loaded"; break;
        case LoadState::NotFound: error.code = ErrorCode::DriverNotFound; break;
        case LoadState::Refused: error.code = ErrorCode::DriverRefused; break;
        case LoadState::Stub:
            error.code = ErrorCode::StubDriver;
            error.driver_result = CUDA_ERROR_STUB_LIBRARY;
            break;
        case LoadState::InitFailed:
            error.code = ErrorCode::DriverInitFailed;
            error.driver_result = report.init_result;
            error.entry_point = "cuInit";
            break;
    }
    return error;
}

Error missing_entry_error(const DriverEntryInfo& entry) {
    const int version = loaded_state().report.driver_version;
    return Error::not_supported(entry.abi_symbol, std::string("the loaded driver (version ") +
                                                      std::to_string(version / 1000) + "." +
                                                      std::to_string(version % 1000 / 10) + ") does not provide " +
                                                      entry.abi_symbol + " (" + entry.name + " ABI " +
                                                      std::to_string(entry.version) + ")");
}

}  // namespace detail

}  // namespace cudyn
