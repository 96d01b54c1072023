// cudyn — FdChannel and FdListener: framed messages and SCM_RIGHTS over Unix
// domain stream sockets, with poll() deadlines on every wait. Part of the
// cudyn_channel component: nothing here knows about CUDA or the driver.
#include "cudyn/channel/fd_channel.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"

#if !defined(_WIN32)
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

namespace cudyn {

namespace {
constexpr detail::Operation kPair{"FdChannel::pair"};
constexpr detail::Operation kConnect{"FdChannel::connect"};
constexpr detail::Operation kAdopt{"FdChannel::adopt"};
constexpr detail::Operation kSend{"FdChannel::send"};
constexpr detail::Operation kReceive{"FdChannel::receive"};
constexpr detail::Operation kListen{"FdListener::listen"};
constexpr detail::Operation kAccept{"FdListener::accept"};
constexpr detail::Operation kPeer{"FdChannel::peer"};
}  // namespace

#if defined(_WIN32)

namespace {
Error unsupported(const detail::Operation& operation) {
    return operation.not_supported({}, "Unix domain socket channels are POSIX only");
}
}  // namespace

Result<void> FdChannel::send_with_descriptors(std::uint32_t, const void*, std::size_t, const std::vector<int>&,
                                              std::chrono::milliseconds) {
    return unsupported(kSend);
}

Result<std::pair<FdChannel, FdChannel>> FdChannel::pair() { return unsupported(kPair); }
Result<FdChannel> FdChannel::connect(const std::string&, std::chrono::milliseconds, const PeerPolicy&) {
    return unsupported(kConnect);
}
Result<FdChannel> FdChannel::adopt(FileDescriptor) { return unsupported(kAdopt); }
Result<void> FdChannel::send(std::uint32_t, const void*, std::size_t, int, std::chrono::milliseconds) {
    return unsupported(kSend);
}
Result<ChannelMessage> FdChannel::receive(std::chrono::milliseconds) { return unsupported(kReceive); }
Result<PeerCredentials> FdChannel::peer() const { return unsupported(kPeer); }
Result<FdListener> FdListener::listen(const std::string&, ListenOptions) { return unsupported(kListen); }
Result<FdChannel> FdListener::accept(std::chrono::milliseconds) { return unsupported(kAccept); }

#else  // POSIX

namespace {

// What precedes every payload on the socket.
struct Frame {
    static constexpr std::size_t kSerializedSize = 32;
    std::uint32_t tag = 0;
    std::uint32_t flags = 0;
    std::uint32_t payload_size = 0;
    std::uint32_t descriptor_count = 0;  // with kCarriesDescriptorList
};
constexpr std::uint32_t kCarriesDescriptor = 1;      // Frame::flags: one descriptor, in ChannelMessage::fd
constexpr std::uint32_t kCarriesDescriptorList = 2;  // descriptor_count of them, in ChannelMessage::descriptors

}  // namespace

namespace detail {
template <>
struct WireLayout<Frame> {
    static constexpr char kMagic[9] = "CUDYNMSG";
    static constexpr const char* kName = "frame";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& frame) {
        wire.u32(frame.tag);
        wire.u32(frame.flags);
        wire.u32(frame.payload_size);
        wire.u32(frame.descriptor_count);
    }
};
}  // namespace detail

namespace {

constexpr std::size_t kFrameSize = Frame::kSerializedSize;
// What one read takes in: every descriptor a message may carry, and one
// more, so that a peer sending too many is told from one sending enough.
constexpr std::size_t kMaxDescriptorsPerRead = FdChannel::kMaxDescriptors + 1;

#if defined(MSG_NOSIGNAL)
constexpr int kSendFlags = MSG_DONTWAIT | MSG_NOSIGNAL;
#else
constexpr int kSendFlags = MSG_DONTWAIT;  // SO_NOSIGPIPE is set on the socket instead
#endif
#if defined(MSG_CMSG_CLOEXEC)
constexpr int kReceiveFlags = MSG_DONTWAIT | MSG_CMSG_CLOEXEC;
#else
constexpr int kReceiveFlags = MSG_DONTWAIT;
#endif

using Clock = std::chrono::steady_clock;

class Deadline {
public:
    explicit Deadline(std::chrono::milliseconds timeout) : timeout_(timeout), end_(Clock::now() + timeout) {}
    int remaining_ms() const {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(end_ - Clock::now()).count();
        return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
    }
    bool passed() const { return Clock::now() >= end_; }
    long long timeout_ms() const { return static_cast<long long>(timeout_.count()); }

private:
    std::chrono::milliseconds timeout_;
    Clock::time_point end_;
};

[[maybe_unused]] void set_cloexec(int fd) noexcept {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) (void)::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

void set_nonblocking(int fd, bool on) noexcept {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

// A close-on-exec Unix stream socket that never raises SIGPIPE.
Result<FileDescriptor> stream_socket(const detail::Operation& operation) {
#if defined(SOCK_CLOEXEC)
    FileDescriptor socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
#else
    FileDescriptor socket(::socket(AF_UNIX, SOCK_STREAM, 0));
    if (socket) set_cloexec(socket.get());
#endif
    if (!socket) return Error::system("socket", errno, operation.name());
#if defined(SO_NOSIGPIPE)
    const int one = 1;
    (void)::setsockopt(socket.get(), SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return socket;
}

// The address of a path or an '@' abstract name.
struct SocketAddress {
    sockaddr_un address{};
    socklen_t length = 0;
    bool abstract = false;
};

Result<SocketAddress> socket_address(const std::string& path, const detail::Operation& operation) {
    SocketAddress out;
    out.address.sun_family = AF_UNIX;
    if (path.empty() || path == "@") return operation.invalid("path is empty");
    if (path.find('\0') != std::string::npos) return operation.invalid("path contains a NUL byte");
    const std::size_t capacity = sizeof(out.address.sun_path);
    if (path[0] == '@') {
#if defined(__linux__)
        const std::size_t name = path.size() - 1;
        if (name > capacity - 1)
            return operation.invalid("path '" + path + "' is longer than the " + std::to_string(capacity - 1) +
                                     " bytes of an abstract socket name");
        out.address.sun_path[0] = '\0';
        std::memcpy(out.address.sun_path + 1, path.data() + 1, name);
        out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name);
        out.abstract = true;
        return out;
#else
        return operation.invalid("path '" + path + "': abstract socket names ('@...') are Linux only");
#endif
    }
    if (path.size() > capacity - 1)
        return operation.invalid("path '" + path + "' is longer than the " + std::to_string(capacity - 1) +
                                 " bytes a Unix socket path may have");
    std::memcpy(out.address.sun_path, path.data(), path.size());
    out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return out;
}

// Waits until `fd` is ready for `events` or the deadline passes.
Result<void> wait_ready(int fd, short events, const Deadline& deadline, const detail::Operation& operation) {
    for (;;) {
        pollfd entry{fd, events, 0};
        const int ready = ::poll(&entry, 1, deadline.remaining_ms());
        if (ready < 0) {
            if (errno == EINTR) continue;
            return Error::system("poll", errno, operation.name());
        }
        if (ready == 0)
            return operation.context(
                Error::timeout("the peer did not answer within " + std::to_string(deadline.timeout_ms()) + " ms"));
        if (entry.revents & POLLNVAL) return operation.invalid("the socket is closed");
        return ok();  // readable, writable, hung up or failed: the next call says which
    }
}

bool peer_gone(int error_number) { return error_number == EPIPE || error_number == ECONNRESET; }

// Collects the descriptors of SCM_RIGHTS messages into `descriptors`.
void take_descriptors(msghdr& message, std::vector<FileDescriptor>& descriptors) {
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd = -1;
            std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
#if !defined(MSG_CMSG_CLOEXEC)
            set_cloexec(fd);
#endif
            descriptors.emplace_back(fd);
        }
    }
}

// Reads exactly `size` bytes, gathering any descriptors that come with them.
Result<void> read_exact(int socket, std::uint8_t* buffer, std::size_t size, std::vector<FileDescriptor>& descriptors,
                        const Deadline& deadline, bool message_started) {
    std::size_t got = 0;
    while (got < size) {
        CUDYN_TRY(wait_ready(socket, POLLIN, deadline, kReceive));
        iovec part{buffer + got, size - got};
        union {
            cmsghdr align;
            char bytes[CMSG_SPACE(sizeof(int) * kMaxDescriptorsPerRead)];
        } control{};
        msghdr message{};
        message.msg_iov = &part;
        message.msg_iovlen = 1;
        message.msg_control = control.bytes;
        message.msg_controllen = sizeof control.bytes;
        const ssize_t n = ::recvmsg(socket, &message, kReceiveFlags);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            if (peer_gone(errno)) return kReceive.io("the peer closed the channel (connection reset)");
            return Error::system("recvmsg", errno, kReceive.name());
        }
        take_descriptors(message, descriptors);
        if (message.msg_flags & MSG_CTRUNC)
            return kReceive.io("the peer sent more descriptors than one message may carry");
        if (n == 0) {
            if (!message_started && got == 0) return kReceive.io("the peer closed the channel");
            return kReceive.io("the peer closed the channel in the middle of a message");
        }
        got += static_cast<std::size_t>(n);
        message_started = true;
    }
    return ok();
}

Result<FileDescriptor> connect_once(const SocketAddress& address, bool* retry) {
    *retry = false;
    CUDYN_TRY_ASSIGN(FileDescriptor socket, stream_socket(kConnect));
    // Non-blocking, so a full backlog answers EAGAIN instead of blocking past the deadline.
    set_nonblocking(socket.get(), true);
    if (::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) != 0) {
        const int error_number = errno;
        if (error_number == ENOENT || error_number == ECONNREFUSED || error_number == EAGAIN ||
            error_number == EINTR) {
            *retry = true;
            return Error::system("connect", error_number, kConnect.name());
        }
        if (error_number != EINPROGRESS) return Error::system("connect", error_number, kConnect.name());
        pollfd entry{socket.get(), POLLOUT, 0};
        int failure = 0;
        socklen_t length = sizeof failure;
        if (::poll(&entry, 1, 100) != 1 ||
            ::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &failure, &length) != 0 || failure != 0) {
            *retry = true;
            return Error::system("connect", failure != 0 ? failure : ETIMEDOUT, kConnect.name());
        }
    }
    set_nonblocking(socket.get(), false);
    return socket;
}

// The kernel's record of the other end of a connected Unix socket.
Result<PeerCredentials> peer_credentials(int socket) {
    PeerCredentials peer;
#if defined(__linux__)
    ucred record{};
    socklen_t length = sizeof record;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &record, &length) != 0)
        return Error::system("getsockopt", errno, "SO_PEERCRED");
    if (length != sizeof record) return Error::system("getsockopt", EINVAL, "SO_PEERCRED answered a short record");
    peer.pid = record.pid;
    peer.uid = record.uid;
    peer.gid = record.gid;
#else
    uid_t uid = 0;
    gid_t gid = 0;
    if (::getpeereid(socket, &uid, &gid) != 0) return Error::system("getpeereid", errno, "");
    peer.uid = static_cast<std::uint32_t>(uid);
    peer.gid = static_cast<std::uint32_t>(gid);
#if defined(LOCAL_PEERPID)
    pid_t pid = -1;
    socklen_t length = sizeof pid;
    if (::getsockopt(socket, SOL_LOCAL, LOCAL_PEERPID, &pid, &length) == 0) peer.pid = pid;
#endif
#endif
    return peer;
}

// ok() when `policy` admits the other end of `socket`. Credentials that
// cannot be read refuse the peer: it is never admitted unchecked.
Result<void> admit_peer(int socket, const PeerPolicy& policy, const detail::Operation& operation,
                        const std::string& side) {
    auto peer = peer_credentials(socket);
    if (!peer)
        return operation.denied("the " + side + "'s credentials could not be read (" + peer.error().describe() +
                                "): refused, never admitted unchecked");
    if (auto admitted = policy.check(*peer); !admitted)
        return operation.denied("refused the " + side + ": " + admitted.error().message);
    return ok();
}

// After bind(): the file must be this user's socket, with no access for
// group or others. Linux created it from the socket's own mode (fchmod
// before bind); elsewhere it is narrowed here. Either way this runs before
// listen(), so nobody can connect while the mode is wider.
Result<void> restrict_socket_file(const std::string& path) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) return kListen.context(Error::system("lstat", errno, path));
    if (!S_ISSOCK(info.st_mode) || info.st_uid != ::geteuid())
        return kListen.denied("'" + path + "' was replaced after bind by something that is not this user's socket");
    if ((info.st_mode & 077) == 0) return ok();
    if (::chmod(path.c_str(), 0600) != 0) return kListen.context(Error::system("chmod", errno, path));
    if (::lstat(path.c_str(), &info) != 0) return kListen.context(Error::system("lstat", errno, path));
    if (!S_ISSOCK(info.st_mode) || (info.st_mode & 077) != 0)
        return kListen.denied("'" + path + "' could not be made private to this user");
    return ok();
}

// What stands at `path` when bind() found it taken: a stale socket of this
// user (nobody listens) is removed for a new bind; anything else is refused
// and left alone.
Result<void> remove_stale_socket(const std::string& path, const SocketAddress& address) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) return kListen.context(Error::system("lstat", errno, path));
    if (!S_ISSOCK(info.st_mode))
        return kListen.context(Error::system("bind", EADDRINUSE, "'" + path + "' exists and is not a socket"));
    if (info.st_uid != ::geteuid())
        return kListen.denied("'" + path + "' is a socket of uid " + std::to_string(info.st_uid) +
                              ", not of this user: never replaced");
    bool retry = false;
    if (connect_once(address, &retry).has_value())
        return kListen.context(Error::system("bind", EADDRINUSE, "another process listens at '" + path + "'"));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return kListen.context(Error::system("unlink", errno, path));
    return ok();
}

}  // namespace

Result<std::pair<FdChannel, FdChannel>> FdChannel::pair() {
    int ends[2] = {-1, -1};
#if defined(SOCK_CLOEXEC)
    const int made = ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends);
#else
    const int made = ::socketpair(AF_UNIX, SOCK_STREAM, 0, ends);
#endif
    if (made != 0) return Error::system("socketpair", errno, kPair.name());
    FileDescriptor first(ends[0]);
    FileDescriptor second(ends[1]);
#if !defined(SOCK_CLOEXEC)
    set_cloexec(first.get());
    set_cloexec(second.get());
#endif
#if defined(SO_NOSIGPIPE)
    const int one = 1;
    (void)::setsockopt(first.get(), SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
    (void)::setsockopt(second.get(), SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return std::make_pair(FdChannel(std::move(first)), FdChannel(std::move(second)));
}

Result<FdChannel> FdChannel::connect(const std::string& path, std::chrono::milliseconds timeout,
                                     const PeerPolicy& listener) {
    CUDYN_TRY_ASSIGN(const SocketAddress address, socket_address(path, kConnect));
    const Deadline deadline(timeout);
    for (;;) {
        bool retry = false;
        auto socket = connect_once(address, &retry);
        if (socket) {
            // A refused listener loses the connection before anything is sent.
            CUDYN_TRY(admit_peer(socket->get(), listener, kConnect, "listener at '" + path + "'"));
            return FdChannel(std::move(*socket));
        }
        if (!retry) return std::move(socket).error();
        if (deadline.passed())
            return kConnect.context(Error::timeout("nobody listened at '" + path + "' within " +
                                                   std::to_string(deadline.timeout_ms()) + " ms (last: " +
                                                   socket.error().describe() + ")"));
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, deadline.remaining_ms())));
    }
}

Result<FdChannel> FdChannel::adopt(FileDescriptor socket) {
    if (!socket) return kAdopt.invalid("the descriptor is empty");
    int type = 0;
    socklen_t length = sizeof type;
    sockaddr_storage address{};
    socklen_t address_length = sizeof address;
    if (::getsockopt(socket.get(), SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM ||
        ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&address), &address_length) != 0 ||
        address.ss_family != AF_UNIX)
        return kAdopt.invalid("descriptor " + std::to_string(socket.get()) + " is not a Unix stream socket");
#if defined(SO_NOSIGPIPE)
    const int one = 1;
    (void)::setsockopt(socket.get(), SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return FdChannel(std::move(socket));
}

Result<PeerCredentials> FdChannel::peer() const {
    if (!socket_) return kPeer.invalid("the channel is empty or closed");
    auto credentials = peer_credentials(socket_.get());
    if (!credentials) return kPeer.context(std::move(credentials).error());
    return credentials;
}

Result<void> FdChannel::send(std::uint32_t tag, const void* payload, std::size_t size, int fd,
                             std::chrono::milliseconds timeout) {
    if (fd < -1) return kSend.invalid("fd " + std::to_string(fd) + " is not an open descriptor");
    return send_frame(tag, payload, size, fd >= 0 ? &fd : nullptr, fd >= 0 ? 1 : 0,
                      fd >= 0 ? kCarriesDescriptor : 0, timeout);
}

Result<void> FdChannel::send_with_descriptors(std::uint32_t tag, const void* payload, std::size_t size,
                                              const std::vector<int>& fds, std::chrono::milliseconds timeout) {
    if (fds.size() > kMaxDescriptors)
        return kSend.invalid(std::to_string(fds.size()) + " descriptors are more than the " +
                             std::to_string(kMaxDescriptors) + " one message carries (SCM_RIGHTS)");
    return send_frame(tag, payload, size, fds.data(), fds.size(), kCarriesDescriptorList, timeout);
}

Result<void> FdChannel::send_frame(std::uint32_t tag, const void* payload, std::size_t size, const int* fds,
                                   std::size_t count, std::uint32_t flags, std::chrono::milliseconds timeout) {
    if (!socket_) return kSend.invalid("the channel is empty or closed");
    if (size > kMaxPayload)
        return kSend.invalid("payload of " + std::to_string(size) + " bytes is larger than the " +
                             std::to_string(kMaxPayload) + " a message carries");
    if (size != 0 && payload == nullptr) return kSend.invalid("payload is null");
    for (std::size_t i = 0; i < count; ++i)
        if (fds[i] < 0 || ::fcntl(fds[i], F_GETFD) < 0)
            return kSend.invalid("fd " + std::to_string(fds[i]) + " is not an open descriptor");

    Frame header;
    header.tag = tag;
    header.flags = flags;
    header.payload_size = static_cast<std::uint32_t>(size);
    header.descriptor_count = (flags & kCarriesDescriptorList) != 0 ? static_cast<std::uint32_t>(count) : 0;
    auto frame = detail::write_record(header);

    // Room for every descriptor a message may carry; only `count` are used.
    union {
        cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int) * kMaxDescriptors)];
    } control{};
    const std::size_t total = kFrameSize + size;
    std::size_t sent = 0;
    bool descriptors_sent = count == 0;
    const Deadline deadline(timeout);
    while (sent < total) {
        CUDYN_TRY(wait_ready(socket_.get(), POLLOUT, deadline, kSend));
        iovec parts[2];
        int pieces = 0;
        if (sent < kFrameSize) parts[pieces++] = iovec{frame.data() + sent, kFrameSize - sent};
        const std::size_t payload_done = sent < kFrameSize ? 0 : sent - kFrameSize;
        if (payload_done < size)
            parts[pieces++] = iovec{const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(payload)) + payload_done,
                                    size - payload_done};
        msghdr message{};
        message.msg_iov = parts;
        message.msg_iovlen = static_cast<decltype(message.msg_iovlen)>(pieces);
        if (!descriptors_sent) {
            // The descriptors ride on the frame's first bytes, all in one control message.
            message.msg_control = control.bytes;
            message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
            cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
            cmsg->cmsg_level = SOL_SOCKET;
            cmsg->cmsg_type = SCM_RIGHTS;
            cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
            std::memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
        }
        const ssize_t n = ::sendmsg(socket_.get(), &message, kSendFlags);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            if (peer_gone(errno))
                return kSend.io(sent == 0 ? "the peer closed the channel"
                                          : "the peer closed the channel in the middle of a message");
            return Error::system("sendmsg", errno, kSend.name());
        }
        descriptors_sent = true;
        sent += static_cast<std::size_t>(n);
    }
    return ok();
}

Result<ChannelMessage> FdChannel::receive(std::chrono::milliseconds timeout) {
    if (!socket_) return kReceive.invalid("the channel is empty or closed");
    const Deadline deadline(timeout);
    std::vector<FileDescriptor> descriptors;  // closed on every error path
    std::uint8_t frame[kFrameSize];
    CUDYN_TRY(read_exact(socket_.get(), frame, kFrameSize, descriptors, deadline, false));

    Frame header;
    if (auto checked = detail::read_record(frame, kFrameSize, header); !checked)
        return kReceive.io("the peer sent something that is not a cudyn channel frame: " + checked.error().message);
    ChannelMessage message;
    message.tag = header.tag;
    const std::uint32_t flags = header.flags;
    const std::uint32_t size = header.payload_size;
    const std::uint32_t listed = header.descriptor_count;
    const bool single = (flags & kCarriesDescriptor) != 0;
    const bool list = (flags & kCarriesDescriptorList) != 0;
    if (size > kMaxPayload || (flags & ~(kCarriesDescriptor | kCarriesDescriptorList)) != 0 || (single && list) ||
        listed > kMaxDescriptors || (!list && listed != 0))
        return kReceive.io("the peer sent a malformed frame (payload " + std::to_string(size) + " bytes, flags " +
                           std::to_string(flags) + ", " + std::to_string(listed) + " descriptors)");
    message.payload.resize(size);
    CUDYN_TRY(read_exact(socket_.get(), message.payload.data(), size, descriptors, deadline, true));

    const std::size_t announced = single ? 1 : listed;
    if (descriptors.size() < announced)
        return kReceive.io(single ? std::string("the frame announced a descriptor but none arrived")
                                  : "the frame announced " + std::to_string(announced) + " descriptors but " +
                                        std::to_string(descriptors.size()) + " arrived");
    if (descriptors.size() > announced)
        return kReceive.io("the peer sent " + std::to_string(descriptors.size()) +
                           " descriptors with a message that carries " + std::to_string(announced));
    for (const FileDescriptor& descriptor : descriptors) {
        struct stat info {};
        if (::fstat(descriptor.get(), &info) != 0)
            return kReceive.context(Error::system("fstat", errno, "a received descriptor is not usable"));
    }
    if (single) message.fd = std::move(descriptors.front());
    if (list) message.descriptors = std::move(descriptors);
    return message;
}

Result<FdListener> FdListener::listen(const std::string& path, ListenOptions options) {
    CUDYN_TRY_ASSIGN(const SocketAddress address, socket_address(path, kListen));
    CUDYN_TRY_ASSIGN(FileDescriptor socket, stream_socket(kListen));
#if defined(__linux__)
    // Linux creates the socket file with the socket's own mode less the
    // umask: 0600 here, so the file is never wider, whatever the umask.
    if (!address.abstract) (void)::fchmod(socket.get(), 0600);
#endif
    const auto* raw = reinterpret_cast<const sockaddr*>(&address.address);
    if (::bind(socket.get(), raw, address.length) != 0) {
        if (errno != EADDRINUSE || address.abstract) return kListen.context(Error::system("bind", errno, path));
        CUDYN_TRY(remove_stale_socket(path, address));
        if (::bind(socket.get(), raw, address.length) != 0) return kListen.context(Error::system("bind", errno, path));
    }
    if (!address.abstract) {
        if (auto private_file = restrict_socket_file(path); !private_file) {
            struct stat info {};
            if (::lstat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode) && info.st_uid == ::geteuid())
                (void)::unlink(path.c_str());
            return std::move(private_file).error();
        }
    }
    if (::listen(socket.get(), 16) != 0) {
        const int error_number = errno;
        if (!address.abstract) (void)::unlink(path.c_str());
        return kListen.context(Error::system("listen", error_number, path));
    }
    set_nonblocking(socket.get(), true);  // accept() after poll() never blocks
    return FdListener(std::move(socket), path, !address.abstract, std::move(options));
}

Result<FdChannel> FdListener::accept(std::chrono::milliseconds timeout) {
    const FileDescriptor& listening = held_->socket;
    if (!listening) return kAccept.invalid("the listener is empty");
    const Deadline deadline(timeout);
    for (;;) {
        if (auto ready = wait_ready(listening.get(), POLLIN, deadline, kAccept); !ready) {
            if (ready.error().code == ErrorCode::Timeout)
                return kAccept.context(Error::timeout("nobody connected to '" + path() + "' within " +
                                                      std::to_string(deadline.timeout_ms()) + " ms"));
            return std::move(ready).error();
        }
#if defined(__linux__)
        FileDescriptor connection(::accept4(listening.get(), nullptr, nullptr, SOCK_CLOEXEC));
#else
        FileDescriptor connection(::accept(listening.get(), nullptr, nullptr));
        if (connection) set_cloexec(connection.get());
#endif
        if (!connection) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
            return Error::system("accept", errno, kAccept.name());
        }
        // Checked before anything is read or written: a refused peer only
        // sees the connection close.
        if (auto admitted = admit_peer(connection.get(), options_.peers, kAccept, "peer"); !admitted) {
            if (!options_.on_refused) return std::move(admitted).error();
            options_.on_refused(admitted.error());
            continue;
        }
        set_nonblocking(connection.get(), false);
        return FdChannel::adopt(std::move(connection));
    }
}

#endif  // POSIX

Result<void> FdListener::Held::release() {
#if !defined(_WIN32)
    if (std::exchange(unlink, false) && !path.empty()) (void)::unlink(path.c_str());
#endif
    return socket.close();
}

Result<ChannelMessage> FdChannel::receive(std::uint32_t expected_tag, std::chrono::milliseconds timeout) {
    auto message = receive(timeout);
    if (!message) return message;
    if (message->tag != expected_tag)
        return kReceive.invalid("expected a message tagged " + std::to_string(expected_tag) + ", got " +
                                std::to_string(message->tag));
    return message;
}

}  // namespace cudyn
