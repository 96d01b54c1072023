// cudyn — send_descriptor / receive_memory_fd / receive_pool_fd: an exported
// file descriptor as one channel message, its info record the payload.
#include "cudyn/share/descriptor_transfer.hpp"

#include "core/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kSend{"send_descriptor"};
constexpr detail::Operation kReceiveMemory{"receive_memory_fd"};
constexpr detail::Operation kReceivePool{"receive_pool_fd"};

// An exported file descriptor and its info record as one message: the record
// is the payload, the descriptor rides along.
template <typename Exported>
Result<void> send_exported(FdChannel& channel, std::uint32_t tag, const Exported& exported,
                           std::chrono::milliseconds timeout) {
    CUDYN_TRY(exported.info.validate());
    if (!exported.fd) return kSend.invalid("the file descriptor is empty");
    const auto bytes = exported.info.to_bytes();
    return channel.send(tag, bytes.data(), bytes.size(), exported.fd.get(), timeout);
}

template <typename Exported, typename Info>
Result<Exported> receive_exported(FdChannel& channel, std::uint32_t tag, const detail::Operation& operation,
                                  std::chrono::milliseconds timeout) {
    CUDYN_TRY_ASSIGN(auto message, channel.receive(tag, timeout));
    CUDYN_TRY_ASSIGN(const Info info, Info::from_bytes(message.payload.data(), message.payload.size()));
    if (!message.fd) return operation.invalid("the message carried no file descriptor");
    return Exported{std::move(message.fd), info};
}

}  // namespace

Result<void> send_descriptor(FdChannel& channel, const MemoryFdDescriptor& exported,
                             std::chrono::milliseconds timeout) {
    return send_exported(channel, kMemoryFdMessageTag, exported, timeout);
}

Result<MemoryFdDescriptor> receive_memory_fd(FdChannel& channel, std::chrono::milliseconds timeout) {
    return receive_exported<MemoryFdDescriptor, PhysicalMemoryInfo>(channel, kMemoryFdMessageTag, kReceiveMemory,
                                                                    timeout);
}

Result<void> send_descriptor(FdChannel& channel, const PoolFdDescriptor& exported, std::chrono::milliseconds timeout) {
    return send_exported(channel, kPoolFdMessageTag, exported, timeout);
}

Result<PoolFdDescriptor> receive_pool_fd(FdChannel& channel, std::chrono::milliseconds timeout) {
    return receive_exported<PoolFdDescriptor, PoolInfo>(channel, kPoolFdMessageTag, kReceivePool, timeout);
}

}  // namespace cudyn
