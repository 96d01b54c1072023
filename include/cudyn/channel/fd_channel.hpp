// cudyn — FdChannel: messages with an optional file descriptor between two
// processes, over a Unix domain socket (SCM_RIGHTS), every wait bounded.
//
//     // parent and a child it starts            // unrelated processes
//     auto ends = cudyn::FdChannel::pair();       auto listener = cudyn::FdListener::listen("/tmp/app.sock");
//     // give ends->second.socket() to the child  auto channel = listener->accept(std::chrono::seconds(30));
//                                                 // other side: FdChannel::connect("/tmp/app.sock", timeout)
//     channel.send(tag, bytes.data(), bytes.size(), fd.get());
//     auto message = channel.receive();           // Result<ChannelMessage>: tag, payload, fd
//
// A message is a 32-byte frame header (magic, version, tag, payload size,
// whether a descriptor rides along), then up to kMaxPayload bytes. Received
// descriptors are close-on-exec, checked with fstat, and owned by the
// ChannelMessage (closed with it unless taken). Every send and receive polls
// with a deadline: a peer that stops answering gives Timeout, a peer that
// exits or closes mid-message gives Io, never a hang or a SIGPIPE.
//
// No dependency on pidfd_getfd (which needs ptrace rights and fails in most
// containers). POSIX only: on Windows every call is NotSupported.
// A component of its own (built as cudyn_channel): it knows nothing of the
// driver or the memory modules; descriptor_transfer.hpp sends shareable memory
// over it.
// Names starting with '@' are Linux abstract socket names (no file).
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
    const std::string& path() const noexcept { return owner_.get().path; }

private:
    struct Traits {
        struct State {
            FileDescriptor socket;
            std::string path;
            bool unlink = false;  // a socket file this listener bound, removed when it goes
        };
        static bool empty(const State& state) noexcept { return !state.socket.valid() && !state.unlink; }
        // Removes the socket file, then closes the socket; neither is kept
        // for a retry (FileDescriptor::close never retries).
        static Result<void> release(State& state);
    };
    FdListener(FileDescriptor socket, std::string path, bool unlink_on_close) noexcept
        : owner_(Traits::State{std::move(socket), std::move(path), unlink_on_close}) {}
    detail::UniqueHandle<Traits> owner_;
};

}  // namespace cudyn
