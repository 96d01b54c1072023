// cudyn — the MPI calls the survey and the descriptor exchange share: checks
// that MPI can be used, MPI's errors as cudyn Errors, a gather of byte
// strings of any length, and the owner of a communicator split off for an
// exchange. Not installed.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace cudyn::mpi::detail {

// Io naming the MPI call and MPI's words for `code`.
Error mpi_error(const char* call, int code);

// InvalidArgument when MPI is not initialized, already finalized, or `comm`
// is MPI_COMM_NULL; then this rank's number in `comm`.
Result<int> rank_in(MPI_Comm comm);

// Every rank's bytes, index = rank in `comm`: an MPI_Allgather of the lengths,
// then one MPI_Allgatherv. Collective. InvalidArgument on every rank when
// some rank's bytes, or all of them together, pass INT_MAX (MPI counts are int).
Result<std::vector<std::vector<std::uint8_t>>> allgather_bytes(MPI_Comm comm, const std::vector<std::uint8_t>& mine);

// A communicator this library made (MPI_Comm_split), freed with MPI_Comm_free.
struct Communicator {
    MPI_Comm comm = MPI_COMM_NULL;

    bool empty() const noexcept { return comm == MPI_COMM_NULL; }
    Result<void> release();  // MPI_Comm_free
};
using OwnedCommunicator = cudyn::detail::UniqueHandle<Communicator>;

}  // namespace cudyn::mpi::detail
