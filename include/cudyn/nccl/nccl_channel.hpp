// cudyn — an NCCL communicator set up over cudyn's descriptor channel, with
// no second channel: rank 0 makes the unique id and sends it, with each
// peer's rank, over FdChannels that already passed the peer credential check
// (peer_policy.hpp); every rank then joins. (Over MPI: cudyn/mpi's
// nccl_communicator.)
#pragma once

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/nccl/communicator.hpp"

#include <chrono>
#include <vector>

namespace cudyn {

// Rank 0 of 1 + peers.size() ranks: sends peer i rank i + 1, then joins.
// InvalidArgument for a null channel; the channel's error (Io, Timeout) if a
// send fails, before NCCL is initialised.
Result<NcclCommunicator> nccl_communicator_as_root(const std::vector<FdChannel*>& peers);

// A rank other than 0: receives its rank, the rank count and the unique id
// from `root` (waiting at most `timeout`), then joins.
Result<NcclCommunicator> nccl_communicator_from_root(FdChannel& root,
                                                     std::chrono::milliseconds timeout = kDefaultChannelTimeout);

}  // namespace cudyn
