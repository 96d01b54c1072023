// cudyn — the exchange of descriptors between ranks (descriptor_exchange.hpp).
#include "cudyn/mpi/descriptor_exchange.hpp"

#include "collectives.hpp"
#include "core/internal.hpp"
#include "descriptor_frame.hpp"

#include <string>

namespace cudyn::mpi {

namespace {

PeerBytes self_entry(int rank) {
    return {rank, PeerStatus::Self,
            Error::invalid_argument("rank " + std::to_string(rank) +
                                    " is this rank: a process does not open what it exported")};
}

PeerBytes different_host(const RankSurvey& survey, int rank) {
    const HostGroups& hosts = survey.hosts;
    const std::string theirs = hosts.hosts[static_cast<std::size_t>(hosts.host_of_rank[static_cast<std::size_t>(rank)])].describe();
    const std::string ours =
        hosts.hosts[static_cast<std::size_t>(hosts.host_of_rank[static_cast<std::size_t>(survey.rank)])].describe();
    return {rank, PeerStatus::DifferentHost,
            Error::invalid_argument("rank " + std::to_string(rank) + " runs on " + theirs + ", this rank on " + ours +
                                    ": its descriptor opens only on its own host, so it was not sent here")};
}

Result<std::vector<PeerBytes>> exchange(MPI_Comm comm, const RankSurvey& survey,
                                        const Result<std::vector<std::uint8_t>>& mine, DescriptorReach reach) {
    CUDYN_TRY_ASSIGN(const int rank, detail::rank_in(comm));
    int size = 0;
    if (const int rc = MPI_Comm_size(comm, &size); rc != MPI_SUCCESS) return detail::mpi_error("MPI_Comm_size", rc);
    const auto ranks = static_cast<std::size_t>(size);
    if (survey.records.size() != ranks || survey.hosts.rank_count() != ranks || survey.rank != rank)
        return Error::invalid_argument("the survey is of another communicator: it has " +
                                       std::to_string(survey.records.size()) + " ranks and this is rank " +
                                       std::to_string(survey.rank) + " there; the communicator has " +
                                       std::to_string(size) + " ranks and this is rank " + std::to_string(rank));
    const std::vector<std::uint8_t> frame = detail::write_contribution(mine);

    std::vector<int> members;  // the ranks of `comm` that gather together, in order
    detail::OwnedCommunicator host_comm;
    MPI_Comm gather_comm = comm;
    if (reach == DescriptorReach::AllRanks) {
        for (int r = 0; r < size; ++r) members.push_back(r);
    } else {
        // Colours are the survey's host numbers, keys the ranks: each host's
        // communicator holds its ranks in ascending order, as ranks_of_host does.
        const int host = survey.hosts.host_of_rank[static_cast<std::size_t>(rank)];
        members = survey.hosts.ranks_of_host[static_cast<std::size_t>(host)];
        detail::Communicator split;
        if (const int rc = MPI_Comm_split(comm, host, rank, &split.comm); rc != MPI_SUCCESS)
            return detail::mpi_error("MPI_Comm_split", rc);
        host_comm = detail::OwnedCommunicator(split);
        gather_comm = split.comm;
    }

    CUDYN_TRY_ASSIGN(auto gathered, detail::allgather_bytes(gather_comm, frame));
    if (gathered.size() != members.size())
        return Error::invalid_argument("the survey says " + std::to_string(members.size()) +
                                       " ranks share this one's host, MPI gathered " +
                                       std::to_string(gathered.size()) + ": the survey is of another communicator");
    // Where each rank's bytes are in `gathered`; ranks of other hosts have none.
    constexpr std::size_t kNotGathered = static_cast<std::size_t>(-1);
    std::vector<std::size_t> slot(ranks, kNotGathered);
    for (std::size_t i = 0; i < members.size(); ++i) slot[static_cast<std::size_t>(members[i])] = i;
    std::vector<PeerBytes> peers;
    peers.reserve(ranks);
    for (int r = 0; r < size; ++r) {
        const std::size_t at = slot[static_cast<std::size_t>(r)];
        if (at == kNotGathered)
            peers.push_back(different_host(survey, r));
        else if (r == rank)
            peers.push_back(self_entry(r));
        else
            peers.push_back(detail::read_contribution(r, gathered[at].data(), gathered[at].size()));
    }
    return peers;
}

}  // namespace

// Every error names the operation, whichever step (MPI, a peer's frame) failed.
Result<std::vector<PeerBytes>> exchange_descriptor_bytes(MPI_Comm comm, const RankSurvey& survey,
                                                         const Result<std::vector<std::uint8_t>>& mine,
                                                         DescriptorReach reach) {
    auto result = exchange(comm, survey, mine, reach);
    if (!result) return cudyn::detail::Operation("mpi::exchange_descriptor_bytes").context(std::move(result).error());
    return result;
}

}  // namespace cudyn::mpi
