// cudyn — the MPI calls the MPI component shares (collectives.hpp).
#include "collectives.hpp"

#include <climits>
#include <string>

namespace cudyn::mpi::detail {

Error mpi_error(const char* call, int code) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
    return Error{ErrorCode::Io, CUDA_SUCCESS, call,
                 std::string(text, static_cast<std::size_t>(length)) + " (MPI error " + std::to_string(code) + ")"};
}

Result<int> rank_in(MPI_Comm comm) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return Error::invalid_argument(std::string("MPI is ") + (finalized ? "already finalized" : "not initialized") +
                                       ": call MPI_Init first");
    if (comm == MPI_COMM_NULL) return Error::invalid_argument("comm is MPI_COMM_NULL");
    int rank = 0;
    if (const int rc = MPI_Comm_rank(comm, &rank); rc != MPI_SUCCESS) return mpi_error("MPI_Comm_rank", rc);
    return rank;
}

Result<std::vector<std::vector<std::uint8_t>>> allgather_bytes(MPI_Comm comm, const std::vector<std::uint8_t>& mine) {
    int size = 0;
    if (const int rc = MPI_Comm_size(comm, &size); rc != MPI_SUCCESS) return mpi_error("MPI_Comm_size", rc);
    // -1 tells every rank that this one cannot send its bytes, so that all of
    // them stop at the same point instead of some waiting in the next call.
    const int length = mine.size() <= static_cast<std::size_t>(INT_MAX) ? static_cast<int>(mine.size()) : -1;
    std::vector<int> lengths(static_cast<std::size_t>(size));
    if (const int rc = MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm); rc != MPI_SUCCESS)
        return mpi_error("MPI_Allgather", rc);
    std::vector<int> offsets(lengths.size());
    long long total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
        if (lengths[r] < 0)
            return Error::invalid_argument("rank " + std::to_string(r) + "'s bytes are over INT_MAX, MPI's count limit");
        offsets[r] = static_cast<int>(total);
        total += lengths[r];
        if (total > INT_MAX)
            return Error::invalid_argument("the ranks' bytes add up to over INT_MAX, MPI's count limit");
    }
    // Never a null buffer, even for nothing to send: some MPIs check.
    std::vector<std::uint8_t> all(static_cast<std::size_t>(total) + 1);
    const std::uint8_t nothing = 0;
    if (const int rc = MPI_Allgatherv(mine.empty() ? &nothing : mine.data(), length, MPI_BYTE, all.data(),
                                      lengths.data(), offsets.data(), MPI_BYTE, comm);
        rc != MPI_SUCCESS)
        return mpi_error("MPI_Allgatherv", rc);
    std::vector<std::vector<std::uint8_t>> gathered(lengths.size());
    for (std::size_t r = 0; r < lengths.size(); ++r)
        gathered[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + lengths[r]);
    return gathered;
}

Result<void> Communicator::release() {
    // MPI_Comm_free sets the handle to MPI_COMM_NULL when it succeeds.
    if (const int rc = MPI_Comm_free(&comm); rc != MPI_SUCCESS) return mpi_error("MPI_Comm_free", rc);
    return ok();
}

}  // namespace cudyn::mpi::detail
