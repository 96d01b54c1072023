// cudyn — FileDescriptor.
#include "cudyn/channel/file_descriptor.hpp"

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

Result<void> FileDescriptor::Traits::release(State& state) {
    // EINTR is success here: the descriptor is closed either way.
    if (close_fd(std::exchange(state.fd, -1)) != 0 && errno != EINTR)
        return Error::system("close", errno, "FileDescriptor::close");
    return ok();
}

Result<FileDescriptor> FileDescriptor::duplicate() const {
    if (!valid()) return Error::invalid_argument("FileDescriptor::duplicate: the descriptor is empty");
#if defined(_WIN32)
    const int copy = ::_dup(get());
#else
    const int copy = ::fcntl(get(), F_DUPFD_CLOEXEC, 0);
#endif
    if (copy < 0) return Error::system("fcntl", errno, "FileDescriptor::duplicate");
    return FileDescriptor(copy);
}

}  // namespace cudyn
