// cudyn — send_posix_fd / receive_posix_fd: ShareableMemoryInfo as the
// payload of a channel message that carries the descriptor.
#include "cudyn/posix_fd_transfer.hpp"

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

Result<void> send_posix_fd(FdChannel& channel, const ExportedFd& exported, std::chrono::milliseconds timeout) {
    return send_exported(channel, kPosixFdMessageTag, exported, "send_posix_fd", timeout);
}

Result<ExportedFd> receive_posix_fd(FdChannel& channel, std::chrono::milliseconds timeout) {
    return receive_exported<ExportedFd, ShareableMemoryInfo>(channel, kPosixFdMessageTag, "receive_posix_fd", timeout);
}

Result<void> send_pool(FdChannel& channel, const ExportedPool& exported, std::chrono::milliseconds timeout) {
    return send_exported(channel, kPoolMessageTag, exported, "send_pool", timeout);
}

Result<ExportedPool> receive_pool(FdChannel& channel, std::chrono::milliseconds timeout) {
    return receive_exported<ExportedPool, PoolShareInfo>(channel, kPoolMessageTag, "receive_pool", timeout);
}

}  // namespace cudyn
