// cudyn — private_socket_path: a directory only this user can enter.
#include "cudyn/channel/socket_path.hpp"

#include "core/internal.hpp"

#if !defined(_WIN32)
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <string>

namespace cudyn {

namespace {
constexpr detail::Operation kPrivatePath{"private_socket_path"};
}  // namespace

#if defined(_WIN32)

Result<std::string> private_socket_path(const std::string&) {
    return kPrivatePath.not_supported({}, "Unix domain socket channels are POSIX only");
}

#else

namespace {

std::string octal_mode(mode_t mode) {
    std::string text(4, '0');
    for (int digit = 3; digit >= 1; --digit, mode >>= 3) text[static_cast<std::size_t>(digit)] = char('0' + (mode & 7));
    return text;
}

// A directory this user owns, not a link, with no access for group or others.
bool is_private_directory(const struct stat& info) {
    return S_ISDIR(info.st_mode) && info.st_uid == ::geteuid() && (info.st_mode & 077) == 0;
}

Result<void> require_private_directory(const std::string& directory) {
    if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST)
        return kPrivatePath.context(Error::system("mkdir", errno, directory));
    struct stat info {};
    if (::lstat(directory.c_str(), &info) != 0) return kPrivatePath.context(Error::system("lstat", errno, directory));
    if (!S_ISDIR(info.st_mode))
        return kPrivatePath.denied("'" + directory + "' exists and is not a directory (a link is never followed)");
    if (info.st_uid != ::geteuid())
        return kPrivatePath.denied("'" + directory + "' belongs to uid " + std::to_string(info.st_uid) +
                                   ", not this user (uid " + std::to_string(::geteuid()) +
                                   "): set XDG_RUNTIME_DIR or TMPDIR to a directory of your own");
    // A umask that took the owner's bits too: this user's own directory, narrowed to 0700.
    if ((info.st_mode & 0700) != 0700 && (info.st_mode & 077) == 0) {
        if (::chmod(directory.c_str(), 0700) != 0) return kPrivatePath.context(Error::system("chmod", errno, directory));
        return ok();
    }
    if ((info.st_mode & 077) != 0)
        return kPrivatePath.denied("'" + directory + "' is open to group or others (mode " +
                                   octal_mode(info.st_mode & 0777) + "): not a private directory");
    return ok();
}

std::string base_directory() {
    if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && runtime[0] == '/') {
        struct stat info {};
        if (::lstat(runtime, &info) == 0 && is_private_directory(info)) return std::string(runtime) + "/cudyn";
    }
    const char* temporary = std::getenv("TMPDIR");
    const std::string root = temporary != nullptr && temporary[0] == '/' ? temporary : "/tmp";
    return root + "/cudyn-" + std::to_string(::geteuid());
}

}  // namespace

Result<std::string> private_socket_path(const std::string& name) {
    if (name.empty()) return kPrivatePath.invalid("name is empty");
    if (name == "." || name == "..") return kPrivatePath.invalid("name '" + name + "' names a directory");
    if (name.find('/') != std::string::npos) return kPrivatePath.invalid("name '" + name + "' contains '/'");
    if (name.find('\0') != std::string::npos) return kPrivatePath.invalid("name contains a NUL byte");
    const std::string directory = base_directory();
    const std::string path = directory + "/" + name;
    constexpr std::size_t kCapacity = sizeof(sockaddr_un{}.sun_path) - 1;
    if (path.size() > kCapacity)
        return kPrivatePath.invalid("'" + path + "' is longer than the " + std::to_string(kCapacity) +
                                    " bytes a Unix socket path may have");
    CUDYN_TRY(require_private_directory(directory));
    return path;
}

#endif

}  // namespace cudyn
