// cudyn — FileDescriptor.
#include "cudyn/file_descriptor.hpp"

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

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
        (void)close();
        fd_ = other.release();
    }
    return *this;
}

FileDescriptor::~FileDescriptor() { (void)close(); }

int FileDescriptor::release() noexcept { return std::exchange(fd_, -1); }

Result<void> FileDescriptor::close() {
    if (fd_ < 0) return ok();
    // Never retried: on Linux the descriptor is gone even when close() reports EINTR.
    if (close_fd(release()) != 0 && errno != EINTR) return Error::system("close", errno, "FileDescriptor::close");
    return ok();
}

Result<FileDescriptor> FileDescriptor::duplicate() const {
    if (fd_ < 0) return Error::invalid_argument("FileDescriptor::duplicate: the descriptor is empty");
#if defined(_WIN32)
    const int copy = ::_dup(fd_);
#else
    const int copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
#endif
    if (copy < 0) return Error::system("fcntl", errno, "FileDescriptor::duplicate");
    return FileDescriptor(copy);
}

}  // namespace cudyn
