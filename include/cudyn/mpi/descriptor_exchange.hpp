// cudyn — sharing descriptors between the ranks of an MPI communicator: every
// rank contributes one descriptor (or the reason it has none) and receives
// each peer's, with a per-peer status saying why one cannot be used here.
// Any descriptor of plain bytes travels (to_bytes / from_bytes); one that
// carries a file descriptor goes through the descriptor channel instead.
// Collective, after survey_ranks on the same communicator.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/mpi/peer_descriptor.hpp"
#include "cudyn/mpi/ranks.hpp"
#include "cudyn/core/result.hpp"

#include <mpi.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace cudyn::mpi {

enum class DescriptorReach {
    SameHost,  // legacy IPC, pool pointers: usable only on the exporter's host
    AllRanks,  // fabric descriptors: every rank receives every descriptor
};

// The exchange itself, for bytes of any kind: `mine` is this rank's
// descriptor bytes or the error that left it without one. Result per rank,
// index = rank. Errors (the same on every rank): InvalidArgument when the
// survey is not of this communicator (its size or this rank differ: checked
// before any collective, so call it on every rank with the same survey) or
// when the contributions add up to more than INT_MAX bytes (MPI counts are
// int); Io naming the MPI call.
Result<std::vector<PeerBytes>> exchange_descriptor_bytes(MPI_Comm comm, const RankSurvey& survey,
                                                         const Result<std::vector<std::uint8_t>>& mine,
                                                         DescriptorReach reach);

// The exchange of one descriptor kind: `mine` is what its export returned,
// failures included (the peers then learn why this rank shares nothing).
// Malformed when Descriptor::from_bytes refuses a peer's bytes (a peer that
// sent another kind), with from_bytes' error prefixed by the rank.
template <typename Descriptor>
Result<std::vector<PeerDescriptor<Descriptor>>> exchange_descriptors(
    MPI_Comm comm, const RankSurvey& survey, const Result<Descriptor>& mine,
    DescriptorReach reach = DescriptorReach::SameHost) {
    CUDYN_TRY_ASSIGN(auto peers, exchange_descriptor_bytes(comm, survey, detail::descriptor_bytes(mine), reach));
    std::vector<PeerDescriptor<Descriptor>> out;
    out.reserve(peers.size());
    for (PeerBytes& peer : peers) out.push_back(parse_peer<Descriptor>(std::move(peer)));
    return out;
}

}  // namespace cudyn::mpi
