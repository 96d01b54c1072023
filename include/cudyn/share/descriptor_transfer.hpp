// cudyn — an exported file descriptor (MemoryFdDescriptor, PoolFdDescriptor)
// and its info record as one FdChannel message: where the channel
// (fd_channel.hpp, which knows nothing of CUDA) meets the sharing records
// (which know nothing of the channel). Either side is usable without the other.
#pragma once

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/share/pool_sharing.hpp"

#include <chrono>
#include <cstdint>

namespace cudyn {

// The tag of the channel message send_descriptor() writes.
inline constexpr std::uint32_t kMemoryFdMessageTag = 0x43554644;  // "CUFD"

// The file descriptor rides along (SCM_RIGHTS) and stays open here; the
// metadata is the payload (PhysicalMemoryInfo's 40 bytes). InvalidArgument for
// an empty file descriptor or metadata that fails validate(); the channel's
// errors otherwise.
Result<void> send_descriptor(FdChannel& channel, const MemoryFdDescriptor& exported,
                             std::chrono::milliseconds timeout = kDefaultChannelTimeout);
// The other side: InvalidArgument for a message with another tag, metadata
// that fails its checks, or no file descriptor (nothing stays open on failure).
Result<MemoryFdDescriptor> receive_memory_fd(FdChannel& channel,
                                             std::chrono::milliseconds timeout = kDefaultChannelTimeout);

// A memory pool's file descriptor (pool_sharing.hpp) the same way, its
// PoolInfo as the payload, under its own tag.
inline constexpr std::uint32_t kPoolFdMessageTag = 0x4355504C;  // "CUPL"
Result<void> send_descriptor(FdChannel& channel, const PoolFdDescriptor& exported,
                             std::chrono::milliseconds timeout = kDefaultChannelTimeout);
Result<PoolFdDescriptor> receive_pool_fd(FdChannel& channel,
                                         std::chrono::milliseconds timeout = kDefaultChannelTimeout);

}  // namespace cudyn
