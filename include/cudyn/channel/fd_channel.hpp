// cudyn — FdChannel: messages with an optional file descriptor between two
// processes, over a Unix domain socket (SCM_RIGHTS), every wait bounded: a
// peer that stops answering gives Timeout, a peer that exits or closes
// mid-message gives Io, never a hang or a SIGPIPE. FdListener accepts
// channels at a path ('@name': a Linux abstract socket name).
//
// Whoever is at the other end of a channel receives what is sent, and a
// descriptor of GPU memory lets its receiver map that memory: both ends of a
// named channel check the other's credentials (peer_policy.hpp) before
// anything is sent or received, by default admitting only this user.
//
// A component of its own: it knows nothing of the driver or the memory
// modules (descriptor_transfer.hpp and allocation_sharing.hpp send sharing
// records over it). POSIX only: on Windows every call is NotSupported.
#pragma once

#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/channel/peer_policy.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/import_ticket.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

inline constexpr std::chrono::milliseconds kDefaultChannelTimeout{10000};

struct ChannelMessage {
    std::uint32_t tag = 0;              // what the sender said it is
    std::vector<std::uint8_t> payload;  // at most FdChannel::kMaxPayload bytes
    FileDescriptor fd;                  // the descriptor send() sent with it, if any (validated)
    // The descriptors send_with_descriptors() sent with it, in their order (validated).
    std::vector<FileDescriptor> descriptors;
};

class FdChannel {
public:
    static constexpr std::size_t kMaxPayload = std::size_t{1} << 16;
    // Descriptors one message carries: what Linux passes in one SCM_RIGHTS
    // control message (SCM_MAX_FD).
    static constexpr std::size_t kMaxDescriptors = 253;

    // Two connected ends (socketpair), for a parent and the child it starts.
    // Both are close-on-exec: hand one to the child explicitly (dup2 it in the
    // child, or posix_spawn_file_actions_adddup2).
    static Result<std::pair<FdChannel, FdChannel>> pair();
    // Connects to a listening FdListener at `path`, retrying while nobody
    // listens there yet; Timeout when nobody did within `timeout`. Before it
    // returns, the listening process must pass `listener` (default: this
    // user; require_pid() to insist on one process): otherwise
    // PermissionDenied, the connection closed, nothing sent.
    static Result<FdChannel> connect(const std::string& path,
                                     std::chrono::milliseconds timeout = kDefaultChannelTimeout,
                                     const PeerPolicy& listener = PeerPolicy());
    // Adopts a connected stream socket (e.g. the end a child inherited).
    // InvalidArgument when `socket` is not a Unix stream socket. No
    // credential check: the caller knows where the socket came from (check
    // peer() against a policy where it does not).
    static Result<FdChannel> adopt(FileDescriptor socket);

    FdChannel() noexcept = default;  // empty
    FdChannel(FdChannel&&) noexcept = default;
    FdChannel& operator=(FdChannel&&) noexcept = default;

    // Sends one message; `fd` (-1: none) is duplicated into the peer by the
    // kernel and stays open here. InvalidArgument for a payload larger than
    // kMaxPayload or a null payload with a size.
    Result<void> send(std::uint32_t tag, const void* payload, std::size_t size, int fd = -1,
                      std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    // Sends one message with up to kMaxDescriptors descriptors (none is
    // fine), all passed at once: the peer receives every one of them in
    // ChannelMessage::descriptors, in this order, or the message fails.
    // InvalidArgument for more, or for one that is not open, before
    // anything is sent.
    Result<void> send_with_descriptors(std::uint32_t tag, const void* payload, std::size_t size,
                                       const std::vector<int>& fds,
                                       std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    // Receives one message. Io when the peer closed the channel (before or in
    // the middle of a message) or sent something that is not a frame;
    // Timeout when none arrived in time. Nothing stays open on failure.
    Result<ChannelMessage> receive(std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    // receive(), then InvalidArgument unless the message has this tag (a
    // descriptor that came with a wrong message is closed).
    Result<ChannelMessage> receive(std::uint32_t expected_tag,
                                   std::chrono::milliseconds timeout = kDefaultChannelTimeout);

    // The kernel's record of the other end (its pid, uid and gid when it
    // connected or listened). Io when the system cannot tell.
    Result<PeerCredentials> peer() const;

    const FileDescriptor& socket() const noexcept { return socket_; }
    bool empty() const noexcept { return !socket_.valid(); }
    // Closes the socket now; the peer's next receive gives Io. (A close is
    // never retried, so the channel leaves live_imports() either way.)
    Result<void> close() {
        listed_.close();
        return socket_.close();
    }

private:
    // Listed in live_imports(): a process-saving tool (CRIU) must know of a
    // socket connected to another process.
    explicit FdChannel(FileDescriptor socket) noexcept
        : socket_(std::move(socket)), listed_(detail::import_open(LiveImport{ImportKind::DescriptorChannel, -1, 0, 0})) {}
    // The frame, its payload and `count` descriptors with `flags` (the frame's).
    Result<void> send_frame(std::uint32_t tag, const void* payload, std::size_t size, const int* fds,
                            std::size_t count, std::uint32_t flags, std::chrono::milliseconds timeout);
    FileDescriptor socket_;
    detail::ImportTicket listed_;
};

// Who may connect to an FdListener, and what it does with those who may not.
struct ListenOptions {
    PeerPolicy peers;  // default: processes of this user only
    // Called with the refusal of each peer the policy refused; with it,
    // accept() goes on waiting for an admitted peer. Without it, accept()
    // returns the refusal (PermissionDenied) and the listener stays usable.
    std::function<void(const Error&)> on_refused;
};

// A listening Unix socket at a path (or an '@' abstract name): accept()
// gives one FdChannel per admitted connecting process. The socket file is
// created with mode 0600 whatever the umask, before the socket listens; an
// existing path is replaced only when it is a stale socket of this user
// (nobody listens), never followed. The file is unlinked when the listener
// goes. An abstract name has no file and no mode: the credential check is
// its only protection. private_socket_path() (socket_path.hpp) gives a
// path in a directory only this user can enter.
class FdListener {
public:
    static Result<FdListener> listen(const std::string& path, ListenOptions options = {});

    FdListener() noexcept = default;  // empty; move-only, closed (and its socket file removed) on destruction

    // The next admitted connection. A refused peer is disconnected before
    // anything is read or written (see ListenOptions::on_refused). Timeout
    // when no admitted process connected within `timeout`.
    Result<FdChannel> accept(std::chrono::milliseconds timeout = kDefaultChannelTimeout);
    const std::string& path() const noexcept { return held_->path; }
    const PeerPolicy& peers() const noexcept { return options_.peers; }

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
    FdListener(FileDescriptor socket, std::string path, bool unlink_on_close, ListenOptions options) noexcept
        : held_(Held{std::move(socket), std::move(path), unlink_on_close}), options_(std::move(options)) {}
    detail::UniqueHandle<Held> held_;
    ListenOptions options_;
};

}  // namespace cudyn
