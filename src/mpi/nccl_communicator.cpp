// cudyn mpi — the NCCL unique id broadcast over MPI, then every rank joins.
#include "cudyn/mpi/nccl_communicator.hpp"

#include "core/internal.hpp"
#include "mpi/collectives.hpp"

#include <array>
#include <cstring>
#include <string>

namespace cudyn::mpi {

namespace {
constexpr cudyn::detail::Operation kNcclCommunicator{"mpi::nccl_communicator"};
// The id, then whether rank 0 made one (1) or the ErrorCode it failed with (2 + code).
constexpr std::size_t kFrameBytes = NcclUniqueId::kBytes + 1;
}  // namespace

Result<NcclCommunicator> nccl_communicator(MPI_Comm comm) {
    const auto rank_or = detail::rank_in(comm);
    if (!rank_or) return kNcclCommunicator.context(rank_or.error());
    const int rank = *rank_or;
    int size = 0;
    if (const int code = MPI_Comm_size(comm, &size); code != MPI_SUCCESS)
        return kNcclCommunicator.context(detail::mpi_error("MPI_Comm_size", code));
    std::array<unsigned char, kFrameBytes> frame{};
    Error failure;
    if (rank == 0) {
        auto id = NcclUniqueId::create();
        if (id) {
            std::memcpy(frame.data(), id->bytes.data(), NcclUniqueId::kBytes);
            frame[NcclUniqueId::kBytes] = 1;
        } else {
            failure = std::move(id).error();
            frame[NcclUniqueId::kBytes] = static_cast<unsigned char>(2 + static_cast<int>(failure.code));
        }
    }
    if (const int code = MPI_Bcast(frame.data(), static_cast<int>(frame.size()), MPI_UNSIGNED_CHAR, 0, comm);
        code != MPI_SUCCESS)
        return kNcclCommunicator.context(detail::mpi_error("MPI_Bcast", code));
    const unsigned char made = frame[NcclUniqueId::kBytes];
    if (made != 1) {
        if (rank == 0) return kNcclCommunicator.context(std::move(failure));
        Error error;
        error.code = static_cast<ErrorCode>(made - 2);
        error.message = std::string(kNcclCommunicator.name()) + ": rank 0 could not make the NCCL unique id";
        return error;
    }
    NcclUniqueId id;
    std::memcpy(id.bytes.data(), frame.data(), NcclUniqueId::kBytes);
    return NcclCommunicator::init_rank(id, size, rank);
}

}  // namespace cudyn::mpi
