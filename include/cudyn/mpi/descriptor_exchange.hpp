// cudyn — sharing descriptors between the ranks of an MPI communicator:
// every rank contributes one descriptor (or the reason it has none) and
// receives each peer's, where the peer's can be used here, with a per-peer
// status saying why not elsewhere. Part of the optional MPI component.
//
//     auto survey = cudyn::mpi::survey_ranks(MPI_COMM_WORLD);
//     auto peers = cudyn::mpi::exchange_descriptors(MPI_COMM_WORLD, *survey,
//                                                   cudyn::export_ipc_memory(buffer));
//     for (auto& peer : *peers)
//         if (peer.status == cudyn::mpi::PeerStatus::Received)
//             auto opened = cudyn::import_ipc_memory(*peer.descriptor);
//     MPI_Barrier(MPI_COMM_WORLD);  // every opener closed before an exporter frees
//
// Any descriptor that is plain bytes works: a type with to_bytes() (an array
// of bytes) and static from_bytes(data, size) returning Result<itself>:
// IpcMemoryDescriptor and IpcEventDescriptor (legacy IPC: same host only),
// PoolPointerDescriptor (the pool itself is imported first, by its own
// route), MemoryFabricDescriptor and PoolFabricDescriptor (fabric handles open on
// other hosts of the same NVLink domain: DescriptorReach::AllRanks, and the
// import says whether the fabric reaches). A descriptor that carries a file
// descriptor (export_memory_fd, export_pool_fd with a POSIX handle) cannot
// travel this way: the number means nothing in another process. Those go
// through the descriptor channel between ranks on one host
// (fd_channel.hpp, descriptor_transfer.hpp: SCM_RIGHTS over a Unix socket),
// whose socket path this exchange can carry as bytes.
//
// Collective over the communicator, like survey_ranks, which must have
// surveyed this communicator: every rank calls it with its own descriptor.
// With DescriptorReach::SameHost the descriptors never leave their host: the
// communicator is split by the survey's host numbers (MPI_Comm_split) and each
// host's ranks gather their own (an MPI_Allgather of lengths, an
// MPI_Allgatherv of the bytes); AllRanks gathers over the whole communicator.
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
