// cudyn — a VMM allocation's POSIX descriptor and its metadata as one
// FdChannel message: where the descriptor channel (fd_channel.hpp, which knows
// nothing of CUDA) meets shareable memory (shareable_memory.hpp, which knows
// nothing of the channel). Either side is usable without the other.
//
//     auto exported = cudyn::export_posix_fd(*memory);
//     CUDYN_TRY(cudyn::send_posix_fd(channel, *exported));          // the descriptor stays open here
//     // the other process
//     auto imported = cudyn::receive_posix_fd(channel).and_then(cudyn::import_posix_fd);
#pragma once

#include "cudyn/fd_channel.hpp"
#include "cudyn/result.hpp"
#include "cudyn/pool_sharing.hpp"
#include "cudyn/shareable_memory.hpp"

#include <chrono>
#include <cstdint>

namespace cudyn {

// The tag of the channel message send_posix_fd() writes.
inline constexpr std::uint32_t kPosixFdMessageTag = 0x43554644;  // "CUFD"

// The descriptor rides along (SCM_RIGHTS), the metadata is the payload
// (ShareableMemoryInfo's 40 bytes). InvalidArgument for an empty descriptor
// or metadata that fails validate(); the channel's errors otherwise.
Result<void> send_posix_fd(FdChannel& channel, const ExportedFd& exported,
                           std::chrono::milliseconds timeout = kDefaultChannelTimeout);
// The other side: InvalidArgument for a message with another tag, metadata
// that fails its checks, or no descriptor (nothing stays open on failure).
Result<ExportedFd> receive_posix_fd(FdChannel& channel, std::chrono::milliseconds timeout = kDefaultChannelTimeout);

// A memory pool's descriptor (pool_sharing.hpp) the same way, its
// PoolShareInfo as the payload, under its own tag.
inline constexpr std::uint32_t kPoolMessageTag = 0x4355504C;  // "CUPL"
Result<void> send_pool(FdChannel& channel, const ExportedPool& exported,
                       std::chrono::milliseconds timeout = kDefaultChannelTimeout);
Result<ExportedPool> receive_pool(FdChannel& channel, std::chrono::milliseconds timeout = kDefaultChannelTimeout);

}  // namespace cudyn
