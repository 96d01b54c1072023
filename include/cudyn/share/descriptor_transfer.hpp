// cudyn — a VMM allocation's POSIX descriptor and its metadata as one
// FdChannel message: where the descriptor channel (fd_channel.hpp, which knows
// nothing of CUDA) meets shareable memory (physical_memory_sharing.hpp, which knows
// nothing of the channel). Either side is usable without the other.
//
//     auto exported = cudyn::export_memory_fd(*memory);
//     CUDYN_TRY(cudyn::send_descriptor(channel, *exported));          // the descriptor stays open here
//     // the other process
//     auto imported = cudyn::receive_memory_fd(channel).and_then(cudyn::import_memory_fd);
#pragma once

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include <chrono>
#include <cstdint>

namespace cudyn {

// The tag of the channel message send_descriptor() writes.
inline constexpr std::uint32_t kMemoryFdMessageTag = 0x43554644;  // "CUFD"

// The descriptor rides along (SCM_RIGHTS), the metadata is the payload
// (PhysicalMemoryInfo's 40 bytes). InvalidArgument for an empty descriptor
// or metadata that fails validate(); the channel's errors otherwise.
Result<void> send_descriptor(FdChannel& channel, const MemoryFdDescriptor& exported,
                           std::chrono::milliseconds timeout = kDefaultChannelTimeout);
// The other side: InvalidArgument for a message with another tag, metadata
// that fails its checks, or no descriptor (nothing stays open on failure).
Result<MemoryFdDescriptor> receive_memory_fd(FdChannel& channel, std::chrono::milliseconds timeout = kDefaultChannelTimeout);

// A memory pool's descriptor (pool_sharing.hpp) the same way, its
// PoolInfo as the payload, under its own tag.
inline constexpr std::uint32_t kPoolFdMessageTag = 0x4355504C;  // "CUPL"
Result<void> send_descriptor(FdChannel& channel, const PoolFdDescriptor& exported,
                       std::chrono::milliseconds timeout = kDefaultChannelTimeout);
Result<PoolFdDescriptor> receive_pool_fd(FdChannel& channel, std::chrono::milliseconds timeout = kDefaultChannelTimeout);

}  // namespace cudyn
