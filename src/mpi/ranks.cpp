// cudyn — the survey of a communicator's ranks (ranks.hpp).
#include "cudyn/mpi/ranks.hpp"

#include "collectives.hpp"
#include "core/internal.hpp"

#include <string>
#include <utility>

namespace cudyn::mpi {

namespace {

Result<RankSurvey> survey(MPI_Comm comm, const RankProbeOptions& options) {
    CUDYN_TRY_ASSIGN(const int rank, detail::rank_in(comm));
    // Never fails: whatever happened here is part of the record, and this
    // rank goes on to the collective the others are waiting in.
    const RankRecord mine = probe_this_rank(options);
    CUDYN_TRY_ASSIGN(auto gathered, detail::allgather_bytes(comm, mine.to_bytes()));

    RankSurvey survey;
    survey.rank = rank;
    survey.records.reserve(gathered.size());
    std::vector<HostIdentity> identities;
    identities.reserve(gathered.size());
    // Every rank parses the same bytes, own record included, so a record that
    // does not parse fails the survey on every rank alike.
    for (std::size_t r = 0; r < gathered.size(); ++r) {
        auto record = RankRecord::from_bytes(gathered[r].data(), gathered[r].size());
        if (!record) {
            Error why = std::move(record).error();
            why.message = "rank " + std::to_string(r) + ": " + why.message;
            return why;
        }
        identities.push_back(record->host);
        survey.records.push_back(std::move(*record));
    }
    survey.capabilities = agree_on_capabilities(survey.records);
    survey.hosts = group_by_host(identities);
    return survey;
}

}  // namespace

// Every error names the operation, whichever step (MPI, a record) failed.
Result<RankSurvey> survey_ranks(MPI_Comm comm, const RankProbeOptions& options) {
    auto result = survey(comm, options);
    if (!result) return cudyn::detail::Operation("mpi::survey_ranks").context(std::move(result).error());
    return result;
}

}  // namespace cudyn::mpi
