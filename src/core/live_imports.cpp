// cudyn — the list of live imports: one locked map, touched only when an
// import opens or closes.
#include "cudyn/core/live_imports.hpp"
#include "cudyn/detail/import_ticket.hpp"

#include <map>
#include <mutex>

namespace cudyn {

namespace {

struct Registry {
    std::mutex mutex;
    std::uint64_t next_id = 1;
    std::map<std::uint64_t, LiveImport> live;  // by id: oldest first
};
Registry& registry() {
    static Registry* const instance = new Registry;  // never destroyed: owners may close at static destruction
    return *instance;
}

}  // namespace

const char* to_string(ImportKind kind) noexcept {
    switch (kind) {
        case ImportKind::IpcMemory: return "ipc-memory";
        case ImportKind::Pool: return "pool";
        case ImportKind::PoolMemory: return "pool-memory";
        case ImportKind::PhysicalMemory: return "physical-memory";
        case ImportKind::FabricMemory: return "fabric-memory";
        case ImportKind::Range: return "range";
        case ImportKind::DescriptorChannel: return "descriptor-channel";
    }
    return "unknown";
}

std::vector<LiveImport> live_imports() {
    Registry& state = registry();
    const std::lock_guard<std::mutex> lock(state.mutex);
    std::vector<LiveImport> alive;
    alive.reserve(state.live.size());
    for (const auto& entry : state.live) alive.push_back(entry.second);
    return alive;
}

namespace detail {

ImportTicket import_open(const LiveImport& import) noexcept {
    ImportTicket ticket;
    try {
        Registry& state = registry();
        const std::lock_guard<std::mutex> lock(state.mutex);
        const std::uint64_t id = state.next_id;
        state.live.emplace(id, import);
        ++state.next_id;
        ticket.id_ = id;
    } catch (...) {  // no memory for the line (or the lock failed): unlisted, not failed
    }
    return ticket;
}

void ImportTicket::close_listed() noexcept {
    Registry& state = registry();
    const std::lock_guard<std::mutex> lock(state.mutex);
    state.live.erase(id_);
    id_ = 0;
}

}  // namespace detail

}  // namespace cudyn
