// cudyn nccl — the unique id, each rank's number and the rank count, over an FdChannel.
#include "cudyn/nccl/nccl_channel.hpp"

#include "core/internal.hpp"

#include <cstdint>
#include <cstring>
#include <string>

namespace cudyn {

namespace {

constexpr detail::Operation kAsRoot{"nccl_communicator_as_root"};
constexpr detail::Operation kFromRoot{"nccl_communicator_from_root"};
constexpr std::uint32_t kInvitationTag = 0x4e43434c;  // "NCCL"
// rank and rank count (4 bytes each, little-endian), then the unique id
constexpr std::size_t kInvitationBytes = 8 + NcclUniqueId::kBytes;

void put_u32(unsigned char* at, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}
std::uint32_t get_u32(const unsigned char* at) {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= static_cast<std::uint32_t>(at[i]) << (8 * i);
    return value;
}

}  // namespace

Result<NcclCommunicator> nccl_communicator_as_root(const std::vector<FdChannel*>& peers) {
    for (std::size_t i = 0; i < peers.size(); ++i)
        if (peers[i] == nullptr) return kAsRoot.invalid("peer channel " + std::to_string(i) + " is null");
    const int rank_count = static_cast<int>(peers.size()) + 1;
    CUDYN_TRY_ASSIGN(const NcclUniqueId id, NcclUniqueId::create());
    for (std::size_t i = 0; i < peers.size(); ++i) {
        unsigned char invitation[kInvitationBytes];
        put_u32(invitation, static_cast<std::uint32_t>(i + 1));
        put_u32(invitation + 4, static_cast<std::uint32_t>(rank_count));
        std::memcpy(invitation + 8, id.bytes.data(), NcclUniqueId::kBytes);
        if (auto sent = peers[i]->send(kInvitationTag, invitation, sizeof invitation); !sent)
            return kAsRoot.context(std::move(sent).error());
    }
    return NcclCommunicator::init_rank(id, rank_count, 0);
}

Result<NcclCommunicator> nccl_communicator_from_root(FdChannel& root, std::chrono::milliseconds timeout) {
    auto message = root.receive(kInvitationTag, timeout);
    if (!message) return kFromRoot.context(std::move(message).error());
    if (message->payload.size() != kInvitationBytes)
        return kFromRoot.io("the root sent " + std::to_string(message->payload.size()) + " bytes, not " +
                            std::to_string(kInvitationBytes));
    const unsigned char* bytes = message->payload.data();
    const std::uint32_t rank = get_u32(bytes);
    const std::uint32_t rank_count = get_u32(bytes + 4);
    if (rank_count < 2 || rank_count > 1u << 20 || rank == 0 || rank >= rank_count)
        return kFromRoot.io("the root sent rank " + std::to_string(rank) + " of " + std::to_string(rank_count));
    NcclUniqueId id;
    std::memcpy(id.bytes.data(), bytes + 8, NcclUniqueId::kBytes);
    return NcclCommunicator::init_rank(id, static_cast<int>(rank_count), static_cast<int>(rank));
}

}  // namespace cudyn
