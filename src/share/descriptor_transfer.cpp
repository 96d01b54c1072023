// cudyn — send_descriptor / receive_memory_fd: PhysicalMemoryInfo as the
// payload of a channel message that carries the descriptor.
#include "cudyn/share/descriptor_transfer.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {

// An exported descriptor (an fd and its info record) as one message: the
// record is the payload, the descriptor rides along.
template <typename Exported>
Result<void> send_exported(FdChannel& channel, std::uint32_t tag, const Exported& exported, const char* operation,
                           std::chrono::milliseconds timeout) {
    CUDYN_TRY(exported.info.validate());
    if (!exported.fd) return Error::invalid_argument(std::string(operation) + ": the descriptor is empty");
    const auto bytes = exported.info.to_bytes();
    return channel.send(tag, bytes.data(), bytes.size(), exported.fd.get(), timeout);
}

template <typename Exported, typename Info>
Result<Exported> receive_exported(FdChannel& channel, std::uint32_t tag, const char* operation,
                                  std::chrono::milliseconds timeout) {
    CUDYN_TRY_ASSIGN(auto message, channel.receive(tag, timeout));
    CUDYN_TRY_ASSIGN(const Info info, Info::from_bytes(message.payload.data(), message.payload.size()));
    if (!message.fd) return Error::invalid_argument(std::string(operation) + ": the message carried no descriptor");
    return Exported{std::move(message.fd), info};
}

}  // namespace

Result<void> send_descriptor(FdChannel& channel, const MemoryFdDescriptor& exported, std::chrono::milliseconds timeout) {
    return send_exported(channel, kMemoryFdMessageTag, exported, "send_descriptor", timeout);
}

Result<MemoryFdDescriptor> receive_memory_fd(FdChannel& channel, std::chrono::milliseconds timeout) {
    return receive_exported<MemoryFdDescriptor, PhysicalMemoryInfo>(channel, kMemoryFdMessageTag, "receive_memory_fd", timeout);
}

Result<void> send_descriptor(FdChannel& channel, const PoolFdDescriptor& exported, std::chrono::milliseconds timeout) {
    return send_exported(channel, kPoolFdMessageTag, exported, "send_descriptor", timeout);
}

Result<PoolFdDescriptor> receive_pool_fd(FdChannel& channel, std::chrono::milliseconds timeout) {
    return receive_exported<PoolFdDescriptor, PoolInfo>(channel, kPoolFdMessageTag, "receive_pool_fd", timeout);
}

}  // namespace cudyn
