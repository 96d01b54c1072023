// cudyn — what an owner of mapped VMM memory waits for before it unmaps.
//
// cuMemUnmap does not wait for device work that still uses the range:
// unmapping under a running fill made the next synchronize answer
// CUDA_ERROR_ILLEGAL_ADDRESS and lost the context for the rest of the process
// (measured on an H100, driver 580). So by default MappedRange and
// GrowableBuffer synchronize first: the context they were mapped in, and the
// primary context of every other device they granted access to. An idle
// synchronize costs well under a microsecond; a busy one waits for all the
// work of those contexts, not only the work that uses this memory.
//
// A program that orders its own work (it synchronized the streams that use
// the memory, or waits on an event recorded after the last use) says so with
// Teardown::CallerSynchronized, and the unmap happens at once.
//
// The other owners need no such choice: cuMemFree, cuMemFreeHost,
// cuMemHostUnregister and cuIpcCloseMemHandle wait for the context's work
// themselves (measured on the same machine), and a released PhysicalMemory
// lives on in the driver until its last mapping is unmapped.
#pragma once

namespace cudyn {

enum class Teardown {
    // Synchronize every context whose work may use the memory, then unmap.
    WaitForDevice,
    // The caller guarantees that no work still uses the memory: unmap at once.
    CallerSynchronized,
};

}  // namespace cudyn
