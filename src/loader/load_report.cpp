// cudyn loader — names and queries of the load report.
#include "cudyn/loader/load_report.hpp"

#include <cstring>

namespace cudyn {

const char* to_string(LoadState state) noexcept {
    switch (state) {
        case LoadState::Loaded: return "loaded";
        case LoadState::NotFound: return "not_found";
        case LoadState::Stub: return "stub";
        case LoadState::InitFailed: return "init_failed";
        case LoadState::Refused: return "refused";
    }
    return "unknown";
}

const char* to_string(ResolvedVia via) noexcept {
    switch (via) {
        case ResolvedVia::None: return "none";
        case ResolvedVia::ProcAddressV2: return "proc_address_v2";
        case ResolvedVia::ProcAddress: return "proc_address";
        case ResolvedVia::Dlsym: return "dlsym";
    }
    return "unknown";
}

std::size_t LoadReport::resolved_count() const noexcept {
    std::size_t count = 0;
    for (const EntryPointReport& entry : entry_points) count += entry.resolved() ? 1 : 0;
    return count;
}

std::vector<const EntryPointReport*> LoadReport::missing_required() const {
    std::vector<const EntryPointReport*> missing;
    for (const EntryPointReport& entry : entry_points)
        if (entry.required && !entry.resolved()) missing.push_back(&entry);
    return missing;
}

const EntryPointReport* LoadReport::find(const char* abi_symbol) const noexcept {
    for (const EntryPointReport& entry : entry_points)
        if (std::strcmp(entry.abi_symbol, abi_symbol) == 0) return &entry;
    return nullptr;
}

}  // namespace cudyn
