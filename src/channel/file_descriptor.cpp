// cudyn — FileDescriptor.
#include "cudyn/channel/file_descriptor.hpp"

#include "core/internal.hpp"

#if defined(_WIN32)
#include <io.h>
#else
#include <fcntl.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <utility>

namespace cudyn {

namespace {
int close_fd(int fd) noexcept {
#if defined(_WIN32)
    return ::_close(fd);
#else
    return ::close(fd);
#endif
}
}  // namespace

Result<void> FileDescriptor::Held::release() {
    // EINTR is success here: the descriptor is closed either way.
    if (close_fd(std::exchange(fd, -1)) != 0 && errno != EINTR)
        return Error::system("close", errno, "FileDescriptor::close");
    return ok();
}

Result<FileDescriptor> FileDescriptor::duplicate() const {
    if (!valid()) return detail::Operation{"FileDescriptor::duplicate"}.invalid("the descriptor is empty");
#if defined(_WIN32)
    const int copy = ::_dup(get());
#else
    const int copy = ::fcntl(get(), F_DUPFD_CLOEXEC, 0);
#endif
    if (copy < 0) return Error::system("fcntl", errno, "FileDescriptor::duplicate");
    return FileDescriptor(copy);
}

}  // namespace cudyn
