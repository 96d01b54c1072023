// cudyn — the library's own machine code made resident when the driver loads.
#pragma once

namespace cudyn::detail {

// Maps every page of the shared library's executable segment into this
// process now (Linux: madvise(MADV_POPULATE_READ), else a read of one byte
// per page), so that no later first call into a part of the library pays a
// page fault on its code. A process's first open_ipc_memory ran on a code
// page nothing had touched yet, and that one fault cost more than all of
// cudyn's other work in the call; the same fault hits the first call of any
// module. The driver's first use (cuInit, tens of milliseconds) is the one
// moment a process already waits for cudyn, so the pages are taken then.
//
// Does nothing when the library is linked statically into the program (the
// executable segment is then the program's, not cudyn's to touch), on
// systems other than Linux, or when the segment cannot be found. Never fails.
void make_own_code_resident() noexcept;

}  // namespace cudyn::detail
