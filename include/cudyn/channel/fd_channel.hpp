// cudyn — FdChannel: messages with an optional file descriptor between two
// processes, over a Unix domain socket (SCM_RIGHTS), every wait bounded: a
// peer that stops answering gives Timeout, a peer that exits or closes
// mid-message gives Io, never a hang or a SIGPIPE. FdListener accepts
// channels at a path ('@name': a Linux abstract socket name).
//
// A component of its own: it knows nothing of the driver or the memory
// modules (descriptor_transfer.hpp and allocation_sharing.hpp send sharing
// records over it). POSIX only: on Windows every call is NotSupported.
#pragma once

#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

inline constexpr std::chrono::milliseconds kDefaultChannelTimeout{10000};

struct ChannelMessage {
    std::uint32_t tag = 0;              // what the sender said it is
    std::vector<std::uint8_t> payload;  // at most FdChannel::kMaxPayload bytes
    FileDescriptor fd;                  // the descriptor sent with it, if any (validated)
};

class FdChannel {
public:
    static constexpr std::size_t kMaxPayload = std::size_t{1} << 16;

    // Two connected ends (socketpair), for a parent and the child it starts.
    // Both are close-on-exec: hand one to the child explicitly (dup2 it in the
    // child, or posix_spawn_file_actions_adddup2).
    static Result<std::pair<FdChannel, FdChannel>> pair();
    // Connects to a listening FdListener at `path`, retrying while nobody
    // listens there yet; Timeout when nobody did within `timeout`.
    static Result<FdChannel> connect(const std::string& path,
                                     std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    // Adopts a connected stream socket (e.g. the end a child inherited).
    // InvalidArgument when `socket` is not a Unix stream socket.
    static Result<FdChannel> adopt(FileDescriptor socket);

    FdChannel() noexcept = default;  // empty
    FdChannel(FdChannel&&) noexcept = default;
    FdChannel& operator=(FdChannel&&) noexcept = default;

    // Sends one message; `fd` (-1: none) is duplicated into the peer by the
    // kernel and stays open here. InvalidArgument for a payload larger than
    // kMaxPayload or a null payload with a size.
    Result<void> send(std::uint32_t tag, const void* payload, std::size_t size, int fd = -1,
                      std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    // Receives one message. Io when the peer closed the channel (before or in
    // the middle of a message) or sent something that is not a frame;
    // Timeout when none arrived in time. Nothing stays open on failure.
    Result<ChannelMessage> receive(std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    // receive(), then InvalidArgument unless the message has this tag (a
    // descriptor that came with a wrong message is closed).
    Result<ChannelMessage> receive(std::uint32_t expected_tag,
                                   std::chrono::milliseconds timeout = kDefaultChannelTimeout);

    const FileDescriptor& socket() const noexcept { return socket_; }
    bool empty() const noexcept { return !socket_.valid(); }
    // Closes the socket now; the peer's next receive gives Io.
    Result<void> close() { return socket_.close(); }

private:
    explicit FdChannel(FileDescriptor socket) noexcept : socket_(std::move(socket)) {}
    FileDescriptor socket_;
};

// A listening Unix socket at a path (or an '@' abstract name): accept()
// gives one FdChannel per connecting process. A filesystem socket it bound is
// unlinked when the listener goes; a stale one left by a dead listener is
// replaced.
class FdListener {
public:
    static Result<FdListener> listen(const std::string& path);

    FdListener() noexcept = default;  // empty; move-only, closed (and its socket file removed) on destruction

    // Timeout when no process connected within `timeout`.
    Result<FdChannel> accept(std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    const std::string& path() const noexcept { return held_->path; }

private:
    struct Held {
        FileDescriptor socket;
        std::string path;
        bool unlink = false;  // a socket file this listener bound, removed when it goes

        bool empty() const noexcept { return !socket.valid() && !unlink; }
        // Removes the socket file, then closes the socket; neither is kept
        // for a retry (FileDescriptor::close never retries).
        Result<void> release();
    };
    FdListener(FileDescriptor socket, std::string path, bool unlink_on_close) noexcept
        : held_(Held{std::move(socket), std::move(path), unlink_on_close}) {}
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
