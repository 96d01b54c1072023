// Who may be at the other end of a descriptor channel: the peer policy, the
// credential check on both ends of a named channel, the socket file's mode
// and what an existing path may be, and the refusal when the credentials
// cannot be read. [channel] runs as any user; [channel-other-user] starts
// children that drop to uid/gid 65534 ('nobody') and needs root with
// CAP_SETUID (its Meson test skips, exit 77, elsewhere).
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/ipc_helpers.hpp"  // open_descriptors
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/channel/peer_policy.hpp"
#include "cudyn/channel/socket_path.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using cudyn::ErrorCode;
using cudyn::FdChannel;
using cudyn::FdListener;
using cudyn::FileDescriptor;
using cudyn::ListenOptions;
using cudyn::PeerCredentials;
using cudyn::PeerPolicy;
using cudyn_test::ChildProcess;
using cudyn_test::ChildRole;
using cudyn_test::ipc::open_descriptors;
using cudyn_test::require_ok;
using cudyn_test::take;

// ---- getsockopt, failed on request -------------------------------------------------------------
// This binary's own getsockopt comes before the C library's for every caller
// (the library included): it counts calls and fails the one asked for, so a
// test can fail each call of an operation in turn.
namespace {
std::atomic<int> g_getsockopt_calls{0};
std::atomic<int> g_getsockopt_failing_call{0};  // 0: none
}  // namespace

extern "C" int getsockopt(int fd, int level, int name, void* value, socklen_t* length) noexcept {
    using Real = int (*)(int, int, int, void*, socklen_t*);
    static const Real real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "getsockopt"));
    const int call = ++g_getsockopt_calls;
    if (call == g_getsockopt_failing_call.load()) {
        errno = ENOBUFS;
        return -1;
    }
    return real(fd, level, name, value, length);
}

namespace {

constexpr std::chrono::milliseconds kStep{5000};
constexpr std::uint32_t kNobody = 65534;
constexpr std::uint32_t kGreeting = 7;

template <typename R>
void require_error(const R& result, ErrorCode code, const std::string& mentions) {
    REQUIRE_FALSE(result.has_value());
    INFO(result.error().describe());
    CHECK(result.error().code == code);
    CHECK(result.error().describe().find(mentions) != std::string::npos);
}

// A fresh directory for socket files, removed with what is left in it.
class ScratchDirectory {
public:
    explicit ScratchDirectory(mode_t mode = 0700) {
        char pattern[] = "/tmp/cudyn-channel-test-XXXXXX";
        REQUIRE(::mkdtemp(pattern) != nullptr);
        path_ = pattern;
        REQUIRE(::chmod(path_.c_str(), mode) == 0);
    }
    ~ScratchDirectory() {
        if (DIR* dir = ::opendir(path_.c_str())) {
            while (const dirent* entry = ::readdir(dir))
                if (entry->d_name[0] != '.') (void)::unlink((path_ + "/" + entry->d_name).c_str());
            ::closedir(dir);
        }
        (void)::rmdir(path_.c_str());
    }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// The peer closed without sending anything: what a refused end sees.
void require_closed_without_a_message(FdChannel& channel) {
    require_error(channel.receive(kStep), ErrorCode::Io, "the peer closed the channel");
}

PeerCredentials self_credentials() {
    return PeerCredentials{static_cast<std::int64_t>(::getpid()), static_cast<std::uint32_t>(::geteuid()),
                           static_cast<std::uint32_t>(::getegid())};
}

}  // namespace

TEST_CASE("peer policy: this user by default, explicit widening and narrowing", "[channel]") {
    const PeerCredentials me = self_credentials();
    const std::uint32_t other = me.uid == kNobody ? kNobody - 1 : kNobody;
    const PeerCredentials stranger{me.pid + 1, other, other};

    const PeerPolicy mine;
    require_ok(mine.check(me));
    const auto refused = mine.check(stranger);
    require_error(refused, ErrorCode::PermissionDenied, "uid " + std::to_string(other));
    CHECK(refused.error().message.find("admits uid " + std::to_string(me.uid)) != std::string::npos);

    // Widening: a uid, or a primary gid.
    require_ok(PeerPolicy().allow_uid(other).check(stranger));
    require_ok(PeerPolicy().allow_gid(other).check(stranger));
    CHECK_FALSE(PeerPolicy().allow_gid(other + 1).check(stranger).has_value());
    // Exactly the listed users: this process's own uid is not implied.
    require_ok(PeerPolicy::users({other}).check(stranger));
    require_error(PeerPolicy::users({other}).check(me), ErrorCode::PermissionDenied, "is not admitted");
    require_error(PeerPolicy::users({}).check(me), ErrorCode::PermissionDenied, "nobody");
    require_ok(PeerPolicy::any_user().check(stranger));

    // Narrowing: one process, or the caller's own rule, on top of the uid.
    require_ok(PeerPolicy().require_pid(me.pid).check(me));
    require_error(PeerPolicy().require_pid(me.pid + 1).check(me), ErrorCode::PermissionDenied,
                  "is not pid " + std::to_string(me.pid + 1));
    require_error(PeerPolicy().allow_uid(other).require_pid(me.pid).check(stranger), ErrorCode::PermissionDenied,
                  "is not pid");
    const auto odd_pid = [](const PeerCredentials& peer) { return peer.pid % 2 == 1; };
    const PeerCredentials even{2, me.uid, me.gid};
    const PeerCredentials odd{3, me.uid, me.gid};
    require_ok(PeerPolicy().require("an odd pid", odd_pid).check(odd));
    require_error(PeerPolicy().require("an odd pid", odd_pid).check(even), ErrorCode::PermissionDenied,
                  "fails the policy's rule: an odd pid");
    // A rule narrows, never widens: a stranger stays refused.
    require_error(PeerPolicy().require("anyone", [](const PeerCredentials&) { return true; }).check(stranger),
                  ErrorCode::PermissionDenied, "is not admitted");
    // A platform that cannot tell the pid refuses under a pid rule.
    const PeerCredentials unknown_pid{-1, me.uid, me.gid};
    require_error(PeerPolicy().require_pid(me.pid).check(unknown_pid), ErrorCode::PermissionDenied,
                  "unknown pid");
}

TEST_CASE("a listener refuses a peer its policy does not admit, says why, and keeps listening", "[channel]") {
    const long descriptors = open_descriptors();
    const std::uint32_t other = ::geteuid() == kNobody ? kNobody - 1 : kNobody;
    ScratchDirectory directory;
    for (const std::string& path : {directory.file("refuse.sock"), "@cudyn-refuse-" + std::to_string(::getpid())}) {
        INFO(path);
        // Admits only another uid: this process, connecting to itself, is refused.
        auto listener = take(FdListener::listen(path, ListenOptions{PeerPolicy::users({other}), {}}));
        auto client = take(FdChannel::connect(path, kStep, PeerPolicy()));
        require_error(listener.accept(kStep), ErrorCode::PermissionDenied,
                      "refused the peer: pid " + std::to_string(::getpid()));
        require_closed_without_a_message(client);  // disconnected before anything was written

        // With a callback: each refusal reported, and accept() waits on.
        std::vector<std::string> refusals;
        auto reporting = take(FdListener::listen(
            path + "-2", ListenOptions{PeerPolicy::users({other}),
                                       [&refusals](const cudyn::Error& why) { refusals.push_back(why.message); }}));
        auto first = take(FdChannel::connect(path + "-2", kStep));
        auto second = take(FdChannel::connect(path + "-2", kStep));
        require_error(reporting.accept(std::chrono::milliseconds(300)), ErrorCode::Timeout, "nobody connected");
        CHECK(refusals.size() == 2);
        for (const std::string& why : refusals) CHECK(why.find("is not admitted") != std::string::npos);
        require_closed_without_a_message(first);
        require_closed_without_a_message(second);
    }
    {
        // The default admits this user: the same exchange goes through.
        const std::string path = directory.file("admit.sock");
        auto listener = take(FdListener::listen(path));
        CHECK(listener.peers().describe() == "uid " + std::to_string(::geteuid()));
        auto client = take(FdChannel::connect(path, kStep));
        auto server = take(listener.accept(kStep));
        const PeerCredentials seen = take(server.peer());
        CHECK(seen.pid == ::getpid());
        CHECK(seen.uid == ::geteuid());
        CHECK(seen.gid == ::getegid());
        require_ok(client.send(kGreeting, "hi", 2));
        CHECK(take(server.receive(kGreeting, kStep)).payload.size() == 2);
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("the connecting side checks the listener before it sends anything", "[channel]") {
    const long descriptors = open_descriptors();
    ScratchDirectory directory;
    const std::string path = directory.file("listener.sock");
    {
        auto listener = take(FdListener::listen(path));
        // An expected pid that is not the listener's (this process).
        const std::int64_t wrong = static_cast<std::int64_t>(::getpid()) + 100000;
        require_error(FdChannel::connect(path, kStep, PeerPolicy().require_pid(wrong)), ErrorCode::PermissionDenied,
                      "refused the listener at '" + path + "': pid " + std::to_string(::getpid()));
        // The listener saw a connection that closed with nothing in it.
        auto abandoned = take(listener.accept(kStep));
        require_closed_without_a_message(abandoned);
        // The listener's own pid is admitted.
        auto client = take(FdChannel::connect(path, kStep, PeerPolicy().require_pid(::getpid())));
        auto server = take(listener.accept(kStep));
        require_ok(server.send(kGreeting, "ok", 2));
        CHECK(take(client.receive(kGreeting, kStep)).payload.size() == 2);
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("socket files are 0600 whatever the umask, and only a stale socket of this user is replaced",
          "[channel]") {
    const long descriptors = open_descriptors();
    ScratchDirectory directory;
    const std::string path = directory.file("mode.sock");
    for (const mode_t mask : {mode_t{000}, mode_t{022}, mode_t{077}}) {
        INFO("umask " << mask);
        const mode_t previous = ::umask(mask);
        auto listener = FdListener::listen(path);
        ::umask(previous);
        REQUIRE(listener.has_value());
        struct stat info {};
        REQUIRE(::lstat(path.c_str(), &info) == 0);
        CHECK(S_ISSOCK(info.st_mode));
        CHECK((info.st_mode & 0777) == 0600);
        CHECK(info.st_uid == ::geteuid());
    }
    // A link is never followed nor replaced: its target is not created.
    const std::string target = directory.file("target");
    REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
    require_error(FdListener::listen(path), ErrorCode::Io, "exists and is not a socket");
    struct stat info {};
    CHECK(::lstat(target.c_str(), &info) != 0);
    REQUIRE(::lstat(path.c_str(), &info) == 0);
    CHECK(S_ISLNK(info.st_mode));
    REQUIRE(::unlink(path.c_str()) == 0);
    // A stale socket of another user is left alone (root can make one).
    if (::geteuid() == 0) {
        {
            FileDescriptor stale(::socket(AF_UNIX, SOCK_STREAM, 0));
            sockaddr_un address{};
            address.sun_family = AF_UNIX;
            std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
            REQUIRE(::bind(stale.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        }
        REQUIRE(::lchown(path.c_str(), kNobody, kNobody) == 0);
        require_error(FdListener::listen(path), ErrorCode::PermissionDenied,
                      "is a socket of uid 65534, not of this user: never replaced");
        REQUIRE(::lstat(path.c_str(), &info) == 0);
        CHECK(info.st_uid == kNobody);
        REQUIRE(::unlink(path.c_str()) == 0);
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("private_socket_path: a 0700 directory of this user, never another's", "[channel]") {
    ScratchDirectory runtime;
    const char* saved_runtime = std::getenv("XDG_RUNTIME_DIR");
    const char* saved_tmpdir = std::getenv("TMPDIR");
    const std::string kept_runtime = saved_runtime ? saved_runtime : "";
    const std::string kept_tmpdir = saved_tmpdir ? saved_tmpdir : "";

    ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
    const std::string path = take(cudyn::private_socket_path("job.sock"));
    CHECK(path == runtime.path() + "/cudyn/job.sock");
    struct stat info {};
    REQUIRE(::lstat((runtime.path() + "/cudyn").c_str(), &info) == 0);
    CHECK(S_ISDIR(info.st_mode));
    CHECK((info.st_mode & 0777) == 0700);
    CHECK(take(cudyn::private_socket_path("job.sock")) == path);  // the same for every process of this user
    {
        auto listener = take(FdListener::listen(path));
        auto client = take(FdChannel::connect(path, kStep));
        auto server = take(listener.accept(kStep));
    }
    REQUIRE(::rmdir((runtime.path() + "/cudyn").c_str()) == 0);

    // A runtime directory open to others is not used: TMPDIR's per-user folder is.
    ScratchDirectory temporary(0777);
    REQUIRE(::chmod(runtime.path().c_str(), 0755) == 0);
    ::setenv("TMPDIR", temporary.path().c_str(), 1);
    const std::string fallback = take(cudyn::private_socket_path("job.sock"));
    const std::string own = temporary.path() + "/cudyn-" + std::to_string(::geteuid());
    CHECK(fallback == own + "/job.sock");
    // That folder opened to others (as another user's would be to us) is refused.
    REQUIRE(::chmod(own.c_str(), 0755) == 0);
    require_error(cudyn::private_socket_path("job.sock"), ErrorCode::PermissionDenied, "mode 0755");
    REQUIRE(::rmdir(own.c_str()) == 0);
    // A link where the folder should be is never followed.
    REQUIRE(::symlink(runtime.path().c_str(), own.c_str()) == 0);
    require_error(cudyn::private_socket_path("job.sock"), ErrorCode::PermissionDenied, "is not a directory");
    REQUIRE(::unlink(own.c_str()) == 0);
    if (::geteuid() == 0) {
        REQUIRE(::mkdir(own.c_str(), 0700) == 0);
        REQUIRE(::lchown(own.c_str(), kNobody, kNobody) == 0);
        require_error(cudyn::private_socket_path("job.sock"), ErrorCode::PermissionDenied, "belongs to uid 65534");
        REQUIRE(::rmdir(own.c_str()) == 0);
    }
    require_error(cudyn::private_socket_path(""), ErrorCode::InvalidArgument, "name is empty");
    require_error(cudyn::private_socket_path("a/b"), ErrorCode::InvalidArgument, "contains '/'");
    require_error(cudyn::private_socket_path(".."), ErrorCode::InvalidArgument, "names a directory");
    require_error(cudyn::private_socket_path(std::string(200, 'x')), ErrorCode::InvalidArgument, "longer than");

    if (saved_runtime) ::setenv("XDG_RUNTIME_DIR", kept_runtime.c_str(), 1); else ::unsetenv("XDG_RUNTIME_DIR");
    if (saved_tmpdir) ::setenv("TMPDIR", kept_tmpdir.c_str(), 1); else ::unsetenv("TMPDIR");
}

TEST_CASE("credentials that cannot be read refuse the peer: each getsockopt failed in turn", "[channel]") {
    const long descriptors = open_descriptors();
    ScratchDirectory directory;
    const std::string path = directory.file("sweep.sock");
    {
    auto listener = take(FdListener::listen(path));
    // One admitted exchange, counting the getsockopt calls it makes.
    const auto exchange = [&]() -> std::pair<cudyn::Result<FdChannel>, cudyn::Result<FdChannel>> {
        auto client = FdChannel::connect(path, kStep);
        auto server = listener.accept(std::chrono::milliseconds(500));
        return {std::move(client), std::move(server)};
    };
    g_getsockopt_calls = 0;
    {
        auto [client, server] = exchange();
        REQUIRE(client.has_value());
        REQUIRE(server.has_value());
    }
    const int calls = g_getsockopt_calls.load();
    REQUIRE(calls >= 2);  // at least the peer credentials on each end
    int refusals = 0;
    for (int failing = 1; failing <= calls; ++failing) {
        INFO("getsockopt call " << failing << " of " << calls << " failed");
        g_getsockopt_calls = 0;
        g_getsockopt_failing_call = failing;
        auto [client, server] = exchange();
        g_getsockopt_failing_call = 0;
        // Whichever end's call failed refused: never both admitted.
        REQUIRE_FALSE((client.has_value() && server.has_value()));
        for (const auto* end : {&client, &server}) {
            if (end->has_value()) continue;
            const cudyn::Error& why = end->error();
            INFO(why.describe());
            if (why.code == ErrorCode::PermissionDenied) {
                CHECK(why.message.find("could not be read") != std::string::npos);
                CHECK(why.message.find("never admitted unchecked") != std::string::npos);
                ++refusals;
            }
        }
        // The refused client's connection may still wait in the backlog: drain it.
        while (listener.accept(std::chrono::milliseconds(50)).has_value()) {
        }
    }
    CHECK(refusals >= 2);  // the credential read of each end was among the calls failed
    // The listener still admits after the sweep.
    auto [client, server] = exchange();
    CHECK(client.has_value());
    CHECK(server.has_value());
    }
    CHECK(open_descriptors() == descriptors);
}

// ---- another user -------------------------------------------------------------------------------

namespace {

// Child exit statuses: what the child ('nobody') saw.
constexpr int kReceivedNothing = 10;    // connected, then the listener closed without a message
constexpr int kReceivedGreeting = 11;   // connected and received the descriptor and its bytes
constexpr int kConnectDenied = 12;      // the socket file's mode kept it out (EACCES)
constexpr int kRefusedListener = 13;    // its own check refused the listener (another uid)

bool drop_to_nobody() {
    return ::setgroups(0, nullptr) == 0 && ::setgid(kNobody) == 0 && ::setuid(kNobody) == 0 &&
           ::geteuid() == kNobody;
}

// argv: path, "any" (admit any listener) or "mine" (this user's only).
int connect_as_nobody(int argc, char** argv) {
    if (argc < 2 || !drop_to_nobody()) return 77;
    const PeerPolicy listener = std::string(argv[1]) == "any" ? PeerPolicy::any_user() : PeerPolicy();
    auto channel = FdChannel::connect(argv[0], std::chrono::milliseconds(3000), listener);
    if (!channel) {
        std::fprintf(stderr, "nobody's connect: %s\n", channel.error().describe().c_str());
        if (channel.error().code == ErrorCode::PermissionDenied) return kRefusedListener;
        return channel.error().message.find("Permission denied") != std::string::npos ? kConnectDenied : 2;
    }
    auto message = channel->receive(std::chrono::milliseconds(5000));
    if (!message) {
        std::fprintf(stderr, "nobody's receive: %s\n", message.error().describe().c_str());
        return message.error().code == ErrorCode::Io ? kReceivedNothing : 3;
    }
    char bytes[5] = {};
    if (!message->fd.valid() || ::pread(message->fd.get(), bytes, 4, 0) != 4) return 4;
    return std::string(bytes) == "GPU!" ? kReceivedGreeting : 5;
}
const ChildRole connect_as_nobody_role("connect-as-nobody", connect_as_nobody);

// A descriptor worth stealing: a file holding "GPU!".
FileDescriptor secret_file(const ScratchDirectory& directory) {
    const std::string path = directory.file("secret");
    FileDescriptor file(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    REQUIRE(file.valid());
    REQUIRE(::write(file.get(), "GPU!", 4) == 4);
    REQUIRE(::unlink(path.c_str()) == 0);
    return file;
}

}  // namespace

TEST_CASE("another user is refused on a path socket and on an abstract name, and receives nothing",
          "[channel-other-user]") {
    REQUIRE(::geteuid() == 0);  // the Meson test skips (77) where no child can change uid
    ScratchDirectory directory(0755);  // 'nobody' may enter: only the socket's own checks stand in its way
    const FileDescriptor secret = secret_file(directory);
    const long descriptors = open_descriptors();
    const std::string file = directory.file("other-user.sock");
    const std::string abstract = "@cudyn-other-user-" + std::to_string(::getpid());

    SECTION("the default socket file (0600) keeps it out before any credential check") {
        auto listener = take(FdListener::listen(file));
        ChildProcess child = ChildProcess::spawn("connect-as-nobody", {file, "any"});
        CHECK(child.wait(std::chrono::seconds(20)) == kConnectDenied);
        require_error(listener.accept(std::chrono::milliseconds(100)), ErrorCode::Timeout, "nobody connected");
    }
    SECTION("a file its mode lets in, and an abstract name: the credential check refuses") {
        for (const std::string& path : {file, abstract}) {
            INFO(path);
            auto listener = take(FdListener::listen(path));
            if (path[0] == '/') REQUIRE(::chmod(path.c_str(), 0666) == 0);  // as under a careless umask
            ChildProcess child = ChildProcess::spawn("connect-as-nobody", {path, "any"});
            require_error(listener.accept(kStep), ErrorCode::PermissionDenied,
                          "(uid 65534, gid 65534) is not admitted: the policy admits uid 0");
            CHECK(child.wait(std::chrono::seconds(20)) == kReceivedNothing);
        }
    }
    SECTION("an allowed uid is admitted and receives the descriptor") {
        for (const std::string& path : {file, abstract}) {
            INFO(path);
            auto listener = take(FdListener::listen(path, ListenOptions{PeerPolicy().allow_uid(kNobody), {}}));
            if (path[0] == '/') REQUIRE(::chmod(path.c_str(), 0666) == 0);
            ChildProcess child = ChildProcess::spawn("connect-as-nobody", {path, "any"});
            auto channel = take(listener.accept(kStep));
            const PeerCredentials peer = take(channel.peer());
            CHECK(peer.uid == kNobody);
            CHECK(peer.pid == child.pid());
            require_ok(channel.send(kGreeting, nullptr, 0, secret.get()));
            CHECK(child.wait(std::chrono::seconds(20)) == kReceivedGreeting);
        }
    }
    SECTION("the connecting side refuses a listener of another user by default") {
        auto listener = take(FdListener::listen(abstract, ListenOptions{PeerPolicy().allow_uid(kNobody), {}}));
        ChildProcess child = ChildProcess::spawn("connect-as-nobody", {abstract, "mine"});
        auto channel = take(listener.accept(kStep));  // the listener admits it ...
        CHECK(child.wait(std::chrono::seconds(20)) == kRefusedListener);  // ... it refuses the listener
        require_closed_without_a_message(channel);
    }
    CHECK(open_descriptors() == descriptors);
}
