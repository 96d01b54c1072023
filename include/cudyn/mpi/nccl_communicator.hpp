// cudyn mpi — an NCCL communicator over the ranks of an MPI communicator:
// rank 0 makes the unique id and MPI broadcasts it, so the job needs no
// second channel. (Without MPI: cudyn/nccl/nccl_channel.hpp.)
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/nccl/communicator.hpp"

#include <mpi.h>

namespace cudyn::mpi {

// Collective over `comm`: every rank gets its NCCL rank (its rank in `comm`)
// of comm's size, on the device of its current context. When rank 0 cannot
// make the id (no NCCL there), every rank answers that error's code with
// rank 0's message, and none blocks in NCCL. InvalidArgument for
// MPI_COMM_NULL.
Result<NcclCommunicator> nccl_communicator(MPI_Comm comm);

}  // namespace cudyn::mpi
