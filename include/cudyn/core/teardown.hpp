// cudyn — Teardown: what an owner of mapped VMM memory waits for before it
// unmaps.
//
// cuMemUnmap does not wait for device work that still uses the range, and an
// unmap under running work can lose the context. So by default MappedRange
// and GrowableBuffer synchronize first: the context they were mapped in, and
// the primary context of every other device they granted access to (all the
// work of those contexts, not only the work on this memory). A program that
// orders its own work says so with Teardown::CallerSynchronized.
//
// The other owners need no such choice: cuMemFree, cuMemFreeHost,
// cuMemHostUnregister and cuIpcCloseMemHandle wait for the context's work
// themselves, and a released PhysicalMemory lives on in the driver until its
// last mapping is unmapped.
#pragma once

namespace cudyn {

enum class Teardown {
    // Synchronize every context whose work may use the memory, then unmap.
    WaitForDevice,
    // The caller guarantees that no work still uses the memory: unmap at once.
    CallerSynchronized,
};

}  // namespace cudyn
