// cudyn — what in this process would block or break a checkpoint of it:
// the live imports of memory another process owns, which the driver's
// checkpoint cannot save, and channels to other processes, which a tool
// that saves the whole process must know of.
//
//     for (const cudyn::CheckpointBlocker& b : cudyn::checkpoint_blockers())
//         std::printf("%s at 0x%llx: %s\n", cudyn::to_string(b.import.kind),
//                     static_cast<unsigned long long>(b.import.address), b.remedy);
//
// Multicast objects are not listed (not in the scope of this module).
#pragma once

#include "cudyn/core/live_imports.hpp"

#include <vector>

namespace cudyn {

struct CheckpointBlocker {
    LiveImport import;
    // The driver cannot checkpoint this process while it is open (memory
    // another process owns). False for a descriptor channel: the driver
    // does not mind a socket, a process-saving tool (CRIU) does.
    bool blocks_driver = true;
    // Whether it can be opened again at the same address after the
    // checkpoint: an ImportedRange (CheckpointPreparation keeps its
    // reservation) and imported physical memory the program maps itself.
    // Not IPC or pool imports: the driver picks the address of an open.
    bool reopens_in_place = false;
    // What to do about it before the checkpoint and after, in words.
    const char* remedy = "";
};

// Every blocker alive now, oldest first (live_imports(), judged).
std::vector<CheckpointBlocker> checkpoint_blockers();

}  // namespace cudyn
