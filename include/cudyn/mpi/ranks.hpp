// cudyn — the ranks of an MPI communicator agree on what their nodes support:
// one exchange of rank records (rank_record.hpp) gives every rank the same
// capability agreement (capability_agreement.hpp) and the same grouping by
// host (host_identity.hpp). Part of the optional MPI component: link
// libcudyn-mpi (pkg-config cudyn-mpi) and MPI.
//
//     MPI_Init(&argc, &argv);
//     auto survey = cudyn::mpi::survey_ranks(MPI_COMM_WORLD);
//     if (survey && !survey->capabilities.common.host_numa_virtual_memory_management)
//         ...  // some rank cannot: take the path every rank can
//     bool neighbours = survey->hosts.same_host(survey->rank, peer);
//
// survey_ranks is a collective: every rank of the communicator calls it. It
// never returns early on one rank alone: this rank's driver failing is part
// of its record (probe_this_rank), not an error, so the others are not left
// waiting. Two collectives: an MPI_Allgather of each record's length (records
// differ in size: devices per rank, and the cudyn version that wrote them),
// then MPI_Allgatherv of the records.
#pragma once

#include "cudyn/mpi/capability_agreement.hpp"
#include "cudyn/mpi/host_identity.hpp"
#include "cudyn/mpi/rank_record.hpp"
#include "cudyn/core/result.hpp"

#include <mpi.h>

#include <vector>

namespace cudyn::mpi {

struct RankSurvey {
    int rank = 0;                     // this process's rank in the communicator
    std::vector<RankRecord> records;  // records[r]: what rank r reported
    CapabilityAgreement capabilities;
    HostGroups hosts;
};

// Every rank's record, merged. Errors, the same on every rank: InvalidArgument
// when MPI is not initialized or `comm` is MPI_COMM_NULL (before any
// collective) or when a rank's record does not parse (naming the rank); Io
// naming the MPI call when MPI returns an error (only under an error handler
// that returns, MPI_ERRORS_RETURN: the default aborts the job).
Result<RankSurvey> survey_ranks(MPI_Comm comm, const RankProbeOptions& options = {});

}  // namespace cudyn::mpi
