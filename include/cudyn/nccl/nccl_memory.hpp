// cudyn — VMM memory with the properties NCCL asks for when it allocates
// itself (ncclMemAlloc), but owned by cudyn: it can grow, be shared and is
// counted by the ledger like any other cudyn memory.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <cstddef>

namespace cudyn {

// Device memory on `device` shareable as a POSIX file descriptor (NCCL's
// peers in other processes import it so), GPUDirect RDMA capable where the
// device reports it, as ncclMemAlloc asks. With `fabric`, shareable as a
// fabric handle too (between nodes of one NVLink domain): ncclMemAlloc tries
// that first and falls back, but a fabric allocation also needs an IMEX
// channel, which no device attribute shows (the capability fingerprint's
// vmm_fabric trial does), so it is asked for, not guessed. NotSupported where
// the device has no VMM, no POSIX descriptor handles (Windows) or, with
// `fabric`, no fabric handles; InvalidArgument for a bad ordinal.
Result<AllocationProperties> nccl_allocation_properties(int device, bool fabric = false);

// A GrowableBuffer of those properties with `capacity` bytes reserved and
// `bytes` mapped (0: nothing yet), in chunks of the recommended granularity
// (NCCL's choice for ncclMemAlloc) unless `chunk_size_bytes` says otherwise.
Result<GrowableBuffer> create_nccl_growable_buffer(int device, std::size_t capacity, std::size_t bytes = 0,
                                                   std::size_t chunk_size_bytes = 0, bool fabric = false);

}  // namespace cudyn
