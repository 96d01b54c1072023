// cudyn — send_posix_fd / receive_posix_fd: ShareableMemoryInfo as the
// payload of a channel message that carries the descriptor.
#include "cudyn/posix_fd_transfer.hpp"

#include <utility>

namespace cudyn {

Result<void> send_posix_fd(FdChannel& channel, const ExportedFd& exported, std::chrono::milliseconds timeout) {
    CUDYN_TRY(exported.info.validate());
    if (!exported.fd) return Error::invalid_argument("send_posix_fd: the descriptor is empty");
    const auto bytes = exported.info.to_bytes();
    return channel.send(kPosixFdMessageTag, bytes.data(), bytes.size(), exported.fd.get(), timeout);
}

Result<ExportedFd> receive_posix_fd(FdChannel& channel, std::chrono::milliseconds timeout) {
    auto message = channel.receive(kPosixFdMessageTag, timeout);
    if (!message) return std::move(message).error();
    auto info = ShareableMemoryInfo::from_bytes(message->payload.data(), message->payload.size());
    if (!info) return std::move(info).error();
    if (!message->fd) return Error::invalid_argument("receive_posix_fd: the message carried no descriptor");
    return ExportedFd{std::move(message->fd), *info};
}

}  // namespace cudyn
