// cudyn — the live imports, judged for a checkpoint of this process.
#include "cudyn/checkpoint/checkpoint_blockers.hpp"

namespace cudyn {

namespace {

CheckpointBlocker judged(const LiveImport& import) {
    CheckpointBlocker blocker;
    blocker.import = import;
    switch (import.kind) {
        case ImportKind::Range:
            blocker.reopens_in_place = true;
            blocker.remedy = "CheckpointPreparation::add(range): unmapped before, mapped again at the same address after";
            break;
        case ImportKind::IpcMemory:
            blocker.remedy = "CheckpointPreparation::add(memory, AddressChange::Allowed): closed before, opened again "
                             "after at an address the driver picks; or close it and import it again";
            break;
        case ImportKind::Pool:
            blocker.remedy = "free its imported pointers, then let the pool go before; import it again after";
            break;
        case ImportKind::PoolMemory:
            blocker.remedy = "free() it (then let its imported pool go) before, import the pointer again after: the "
                             "driver picks its address";
            break;
        case ImportKind::PhysicalMemory:
        case ImportKind::FabricMemory:
            blocker.reopens_in_place = true;
            blocker.remedy = "unmap and release it before (keep the AddressRange and a duplicate of its descriptor or "
                             "handle), import it again after and map it at the same offsets";
            break;
        case ImportKind::DescriptorChannel:
            blocker.blocks_driver = false;
            blocker.remedy = "the driver does not mind it; a tool that saves the whole process (CRIU) may refuse a "
                             "socket connected to a process it does not save: close it before, connect again after";
            break;
    }
    return blocker;
}

}  // namespace

std::vector<CheckpointBlocker> checkpoint_blockers() {
    const std::vector<LiveImport> imports = live_imports();
    std::vector<CheckpointBlocker> blockers;
    blockers.reserve(imports.size());
    for (const LiveImport& import : imports) blockers.push_back(judged(import));
    return blockers;
}

}  // namespace cudyn
