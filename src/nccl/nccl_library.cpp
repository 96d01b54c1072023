// cudyn nccl — finding and opening NCCL once, resolving its entries, the load report.
#include "cudyn/nccl/nccl_library.hpp"
#include "loader/internal.hpp"
#include "nccl/internal.hpp"

#if !defined(_WIN32)
#include <glob.h>
#endif

#include <cstring>
#include <string>
#include <vector>

namespace cudyn {

namespace {

#if !defined(_WIN32)
constexpr const char* kDefaultNccl = "libnccl.so.2";
// Where the nvidia-nccl wheel puts the library, under a Python package folder.
constexpr const char* kWheelPath = "nvidia/nccl/lib/libnccl.so.2";
#endif

struct NcclLoader {
    NcclReport report;
    nccl::Table table;
};

#if !defined(_WIN32)
// The Python package folders the wheel may be under, in the order Python
// itself would look: $PYTHONPATH, the active virtual environment, the site
// folders of each Python installation on $PATH (<prefix>/bin ->
// <prefix>/lib/python3.*/site-packages: virtual environments, pyenv, conda),
// the user's and the system's site folders. cudyn never runs Python to ask.
std::vector<std::string> python_package_folders() {
    std::vector<std::string> folders;
    if (const char* path = loader::secure_environment("PYTHONPATH"); path != nullptr) {
        std::string list = path;
        std::size_t at = 0;
        while (at <= list.size()) {
            std::size_t end = list.find(':', at);
            if (end == std::string::npos) end = list.size();
            if (end > at && list[at] == '/') folders.push_back(list.substr(at, end - at));
            at = end + 1;
        }
    }
    std::vector<std::string> patterns;
    if (const char* venv = loader::secure_environment("VIRTUAL_ENV"); venv != nullptr && venv[0] == '/')
        patterns.push_back(std::string(venv) + "/lib/python3*/site-packages");
    if (const char* path = loader::secure_environment("PATH"); path != nullptr) {
        const std::string list = path;
        std::size_t at = 0;
        while (at <= list.size()) {
            std::size_t end = list.find(':', at);
            if (end == std::string::npos) end = list.size();
            const std::string folder = list.substr(at, end - at);
            if (folder.size() > 4 && folder[0] == '/' && folder.compare(folder.size() - 4, 4, "/bin") == 0)
                patterns.push_back(folder.substr(0, folder.size() - 4) + "/lib/python3*/site-packages");
            at = end + 1;
        }
    }
    if (const char* home = loader::secure_environment("HOME"); home != nullptr && home[0] == '/')
        patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
    patterns.push_back("/usr/local/lib/python3*/dist-packages");
    patterns.push_back("/usr/local/lib/python3*/site-packages");
    patterns.push_back("/usr/lib/python3/dist-packages");
    patterns.push_back("/usr/lib/python3*/site-packages");
    for (const std::string& pattern : patterns) {
        glob_t found{};
        if (::glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &found) == 0)
            for (std::size_t i = 0; i < found.gl_pathc; ++i) folders.emplace_back(found.gl_pathv[i]);
        ::globfree(&found);
    }
    return folders;
}
#endif

// Opens the first library that loads: the override alone, else the system's
// search, then the wheel's place under each package folder.
loader::DynamicLibrary open_nccl(NcclReport& report) {
    std::string error;
    const char* override_path = loader::secure_environment("CUDYN_NCCL_PATH");
    if (override_path != nullptr && *override_path != '\0') {
        report.tried.emplace_back(override_path);
        if (!loader::is_absolute_path(override_path)) {
            report.state = NcclState::Refused;
            report.message = std::string("CUDYN_NCCL_PATH must be an absolute path, not \"") + override_path + "\"";
            return {};
        }
        loader::DynamicLibrary library = loader::DynamicLibrary::open(override_path, error);
        if (!library.is_open()) report.message = std::string("could not open ") + override_path + ": " + error;
        return library;
    }
#if defined(_WIN32)
    report.message = "NCCL is not built for Windows";
    return {};
#else
    report.tried.emplace_back(kDefaultNccl);
    loader::DynamicLibrary library = loader::DynamicLibrary::open(kDefaultNccl, error);
    if (library.is_open()) return library;
    const std::string first_error = error;
    for (const std::string& candidate : nccl::wheel_candidates()) {
        report.tried.push_back(candidate);
        library = loader::DynamicLibrary::open(candidate, error);
        if (library.is_open()) return library;
    }
    report.message = std::string("could not open ") + kDefaultNccl + " (" + first_error +
                     "), nor nvidia/nccl/lib/libnccl.so.2 under any Python package folder; "
                     "set CUDYN_NCCL_PATH to the library";
    return {};
#endif
}

void load(NcclLoader& loader) {
    NcclReport& report = loader.report;
    const loader::DynamicLibrary library = open_nccl(report);
    if (!library.is_open()) return;  // NotFound or Refused, with the message
    report.library_path = library.real_path();
    nccl::Table& table = loader.table;
#define CUDYN_NCCL_RESOLVE(member, shape, name, major, minor)                        \
    table.member = reinterpret_cast<nccl::Pfn::shape>(library.symbol(name));          \
    if (table.member == nullptr) report.missing_entries.emplace_back(name);
    CUDYN_NCCL_ENTRIES(CUDYN_NCCL_RESOLVE)
#undef CUDYN_NCCL_RESOLVE
    int version = 0;
    if (table.get_version == nullptr || table.get_version(&version) != nccl::kSuccess) {
        report.state = NcclState::Unusable;
        report.message = report.library_path + (table.get_version == nullptr
                                                    ? " has no ncclGetVersion (not NCCL, or older than 2.9)"
                                                    : ": ncclGetVersion failed");
        return;
    }
    report.version = version;
    report.state = NcclState::Loaded;
}

// Allocated once and never destroyed: NCCL stays loaded for the process, as
// the driver does, so an object released during exit can still call in.
NcclLoader& loaded() {
    static NcclLoader* loader = [] {
        auto* fresh = new NcclLoader;
        load(*fresh);
        return fresh;
    }();
    return *loader;
}

std::string version_text(int code) {
    return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

}  // namespace

const char* to_string(NcclState state) noexcept {
    switch (state) {
        case NcclState::Loaded: return "loaded";
        case NcclState::NotFound: return "not_found";
        case NcclState::Unusable: return "unusable";
        case NcclState::Refused: return "refused";
    }
    return "unknown";
}

const NcclReport& nccl_report() { return loaded().report; }

Result<void> nccl_status() {
    const NcclReport& report = nccl_report();
    if (report.state == NcclState::Loaded) return ok();
    Error error;
    switch (report.state) {
        case NcclState::NotFound: error.code = ErrorCode::DriverNotFound; break;
        case NcclState::Refused: error.code = ErrorCode::DriverRefused; break;
        default: error.code = ErrorCode::DriverInitFailed; break;
    }
    error.message = "NCCL is not usable: " + report.message;
    return error;
}

namespace nccl {

std::vector<std::string> wheel_candidates() {
    std::vector<std::string> candidates;
#if !defined(_WIN32)
    for (const std::string& folder : python_package_folders()) candidates.push_back(folder + "/" + kWheelPath);
#endif
    return candidates;
}

Result<const Table*> usable_table(const char* operation) {
    if (auto status = nccl_status(); !status) {
        Error error = std::move(status).error();
        error.message = std::string(operation) + ": " + error.message;
        return error;
    }
    return &loaded().table;
}

Error missing_entry(const char* entry, const char* operation) {
    std::string since;
#define CUDYN_NCCL_SINCE(member, shape, name, major, minor) \
    if (std::strcmp(entry, name) == 0) since = " (NCCL " #major "." #minor " brought it)";
    CUDYN_NCCL_ENTRIES(CUDYN_NCCL_SINCE)
#undef CUDYN_NCCL_SINCE
    const NcclReport& report = nccl_report();
    return Error::not_supported(entry, std::string(operation) + ": the loaded NCCL " + version_text(report.version) +
                                           " (" + report.library_path + ") has no " + entry + since);
}

Result<void> check(int result, const char* entry, const char* operation, Comm comm) {
    if (result == kSuccess) return ok();
    const Table& table = loaded().table;
    const char* words = table.get_error_string != nullptr ? table.get_error_string(result) : nullptr;
    const char* last = comm != nullptr && table.get_last_error != nullptr ? table.get_last_error(comm) : nullptr;
    Error error;
    error.code = ErrorCode::Driver;
    error.entry_point = entry;
    error.message = std::string(operation) + ": " + entry + " answered ncclResult_t " + std::to_string(result) +
                    (words != nullptr ? std::string(" (") + words + ")" : std::string()) +
                    (last != nullptr && *last != '\0' ? std::string(": ") + last : std::string());
    return error;
}

}  // namespace nccl

}  // namespace cudyn
