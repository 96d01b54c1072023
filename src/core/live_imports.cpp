// cudyn — the list of live imports: one locked map, touched only when an
// import opens or closes.
#include "cudyn/core/live_imports.hpp"
#include "cudyn/detail/import_ticket.hpp"
#include "core/live_records.hpp"

namespace cudyn {

namespace {

using Registry = detail::LiveRecords<LiveImport>;

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

std::vector<LiveImport> live_imports() { return Registry::instance().list(); }

namespace detail {

ImportTicket import_open(const LiveImport& import) noexcept {
    ImportTicket ticket;
    try {
        ticket.id_ = Registry::instance().add(import);
    } catch (...) {  // no memory for the line (or the lock failed): unlisted, not failed
    }
    return ticket;
}

void ImportTicket::close_listed() noexcept {
    Registry::instance().remove(id_);
    id_ = 0;
}

}  // namespace detail

}  // namespace cudyn
