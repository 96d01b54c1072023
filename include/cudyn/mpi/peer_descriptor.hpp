// cudyn — what a rank learns about each peer's descriptor in an exchange
// (descriptor_exchange.hpp): the descriptor, or why there is none to use.
// Part of the optional MPI component; this header itself needs no MPI.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::mpi {

enum class PeerStatus {
    Received,       // the peer's descriptor, parsed
    Self,           // this rank's own entry: a process does not open what it exported
    DifferentHost,  // a same-host exchange and the peer runs on another host: not sent
    NothingShared,  // the peer had no descriptor: its error travelled instead
    Malformed,      // the peer's bytes did not parse (as a contribution, or as this descriptor kind)
};
const char* to_string(PeerStatus status) noexcept;  // "received", "self", "different_host", ...

struct PeerBytes {
    int rank = 0;
    PeerStatus status = PeerStatus::Self;
    // Received: the peer's descriptor bytes. Otherwise why not: Self and
    // DifferentHost are InvalidArgument saying so (the error opening it would
    // be); NothingShared carries the peer's ErrorCode and CUresult, with the
    // message "rank N shared nothing: " and the peer's describe(); Malformed
    // the parse error, naming the rank.
    Result<std::vector<std::uint8_t>> bytes;
};

template <typename Descriptor>
struct PeerDescriptor {
    int rank = 0;
    PeerStatus status = PeerStatus::Self;
    Result<Descriptor> descriptor;  // Received: parsed; otherwise why not (as PeerBytes::bytes)
};

namespace detail {
// A descriptor's bytes, or the error that left the rank without one.
template <typename Descriptor>
Result<std::vector<std::uint8_t>> descriptor_bytes(const Result<Descriptor>& descriptor) {
    if (!descriptor.has_value()) return descriptor.error();
    const auto bytes = descriptor->to_bytes();
    return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}
}  // namespace detail

// A peer's bytes read as Descriptor (to_bytes() / static from_bytes(data,
// size), as every byte-only cudyn descriptor has): Received with the
// descriptor, Malformed with from_bytes' error prefixed by the rank, or the
// peer's other status and error unchanged.
template <typename Descriptor>
PeerDescriptor<Descriptor> parse_peer(PeerBytes peer) {
    if (!peer.bytes.has_value()) return {peer.rank, peer.status, Result<Descriptor>(std::move(peer.bytes).error())};
    auto parsed = Descriptor::from_bytes(peer.bytes->data(), peer.bytes->size());
    if (parsed.has_value()) return {peer.rank, PeerStatus::Received, std::move(parsed)};
    Error why = std::move(parsed).error();
    why.message = "rank " + std::to_string(peer.rank) + "'s descriptor: " + why.message;
    return {peer.rank, PeerStatus::Malformed, Result<Descriptor>(std::move(why))};
}

}  // namespace cudyn::mpi
