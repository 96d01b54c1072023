// cudyn — the frames of a descriptor exchange (descriptor_frame.hpp) and the
// names of peer statuses (peer_descriptor.hpp).
#include "descriptor_frame.hpp"

#include "wire_values.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace cudyn::mpi {

const char* to_string(PeerStatus status) noexcept {
    switch (status) {
        case PeerStatus::Received: return "received";
        case PeerStatus::Self: return "self";
        case PeerStatus::DifferentHost: return "different_host";
        case PeerStatus::NothingShared: return "nothing_shared";
        case PeerStatus::Malformed: return "malformed";
    }
    return "unknown";
}

namespace detail {

namespace {

constexpr const char kMagic[9] = "CUDYNPDX";
constexpr std::size_t kHeaderSize = cudyn::detail::kWireHeaderSize;
constexpr std::uint16_t kShared = 1;
constexpr std::uint16_t kNothing = 2;
constexpr std::size_t kNothingFields = 12;  // ErrorCode, CUresult, the two text sizes

PeerBytes malformed(int rank, const std::string& what) {
    return {rank, PeerStatus::Malformed,
            Error::invalid_argument("rank " + std::to_string(rank) + "'s contribution: " + what)};
}

}  // namespace

std::vector<std::uint8_t> write_contribution(const Result<std::vector<std::uint8_t>>& mine) {
    std::string entry, message;
    if (!mine.has_value()) {
        entry = mine.error().entry_point.substr(0, kMaxTextBytes);
        message = mine.error().message.substr(0, kMaxTextBytes);
    }
    const std::size_t body = mine.has_value() ? mine->size() : kNothingFields + entry.size() + message.size();
    std::vector<std::uint8_t> frame(kHeaderSize + body);
    cudyn::detail::WireWriter out(frame.data());
    out.fixed(magic_bytes(kMagic));
    out.u16(std::uint16_t{1});
    out.u16(mine.has_value() ? kShared : kNothing);
    // Never past 4 GiB: the exchange refuses contributions over INT_MAX bytes first.
    out.u32(static_cast<std::uint32_t>(frame.size()));
    std::uint8_t* rest = frame.data() + kHeaderSize;
    if (mine.has_value()) {
        if (!mine->empty()) std::memcpy(rest, mine->data(), mine->size());
        return frame;
    }
    out.u32(static_cast<std::uint32_t>(mine.error().code));
    out.u32(static_cast<std::uint32_t>(mine.error().driver_result));
    out.u16(static_cast<std::uint16_t>(entry.size()));
    out.u16(static_cast<std::uint16_t>(message.size()));
    rest += kNothingFields;
    if (!entry.empty()) std::memcpy(rest, entry.data(), entry.size());
    if (!message.empty()) std::memcpy(rest + entry.size(), message.data(), message.size());
    return frame;
}

PeerBytes read_contribution(int rank, const void* data, std::size_t size) {
    if (data == nullptr) return malformed(rank, "null data");
    if (size < kHeaderSize)
        return malformed(rank, std::to_string(size) + " bytes is shorter than its " + std::to_string(kHeaderSize) +
                                   "-byte header");
    cudyn::detail::WireReader in(data, size);
    FixedBytes<8> magic;
    in.fixed(magic);
    if (magic.value != magic_bytes(kMagic).value) return malformed(rank, "wrong magic (not a CUDYNPDX frame)");
    std::uint16_t version = 0, kind = 0;
    std::uint32_t length = 0;
    in.u16(version);
    in.u16(kind);
    in.u32(length);
    if (version == 0) return malformed(rank, "version 0 (versions start at 1)");
    if (length != size)
        return malformed(rank, "length field says " + std::to_string(length) + " bytes, " + std::to_string(size) +
                                   " were given");
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    if (kind == kShared)
        return {rank, PeerStatus::Received, std::vector<std::uint8_t>(bytes + kHeaderSize, bytes + size)};
    if (kind != kNothing) return malformed(rank, "unknown kind " + std::to_string(kind));
    if (size < kHeaderSize + kNothingFields)
        return malformed(rank, std::to_string(size) + " bytes cannot hold the error of a kind-2 frame");
    std::uint32_t code = 0, result = 0;
    std::uint16_t entry_size = 0, message_size = 0;
    in.u32(code);
    in.u32(result);
    in.u16(entry_size);
    in.u16(message_size);
    if (entry_size > kMaxTextBytes || message_size > kMaxTextBytes ||
        size < kHeaderSize + kNothingFields + entry_size + message_size)
        return malformed(rank, "texts of " + std::to_string(entry_size) + " and " + std::to_string(message_size) +
                                   " bytes do not fit its " + std::to_string(size) + " bytes");
    const auto* text = reinterpret_cast<const char*>(bytes + kHeaderSize + kNothingFields);
    Error why;
    if (!error_code_from_wire(code, why.code))
        return malformed(rank, "error code " + std::to_string(code) + ", more than an int holds");
    why.driver_result = driver_result_from_wire(result);
    why.entry_point.assign(text, entry_size);
    why.message = "rank " + std::to_string(rank) + " shared nothing: " + std::string(text + entry_size, message_size);
    return {rank, PeerStatus::NothingShared, std::move(why)};
}

}  // namespace detail

}  // namespace cudyn::mpi
