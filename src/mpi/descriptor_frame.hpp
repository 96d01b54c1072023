// cudyn — one rank's contribution to a descriptor exchange, as bytes: its
// descriptor, or the error that left it without one, so that its peers can
// say why (descriptor_exchange.hpp). Not installed; no MPI.
//
//   magic[8] "CUDYNPDX"   u16 version (1)   u16 kind   u32 length of the whole frame
//   kind 1 (shared):  the descriptor's bytes
//   kind 2 (nothing): u32 ErrorCode's value, u32 CUresult, u16 entry point
//                     size, u16 message size, then the error's entry point and
//                     message (at most kMaxTextBytes bytes each)
// A newer version may append to a kind-2 frame; a reader never refuses a
// newer version of kind 1 or 2, and reads an unknown kind as malformed.
#pragma once

#include "cudyn/mpi/peer_descriptor.hpp"
#include "cudyn/core/result.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cudyn::mpi::detail {

inline constexpr std::size_t kMaxTextBytes = 1024;

std::vector<std::uint8_t> write_contribution(const Result<std::vector<std::uint8_t>>& mine);

// Rank `rank`'s frame: Received with the descriptor bytes, NothingShared with
// the peer's error, or Malformed saying what is wrong with the frame.
PeerBytes read_contribution(int rank, const void* data, std::size_t size);

}  // namespace cudyn::mpi::detail
