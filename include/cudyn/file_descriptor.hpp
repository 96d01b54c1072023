// cudyn — FileDescriptor: owns one POSIX file descriptor (a VMM allocation
// exported as CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, a socket) and closes
// it once. Move-only. On Windows the type exists but nothing produces one.
#pragma once

#include "cudyn/result.hpp"

namespace cudyn {

class FileDescriptor {
public:
    FileDescriptor() noexcept = default;  // empty (-1)
    // Takes ownership of `fd` (-1: empty).
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept;
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor();  // closes, silently

    int get() const noexcept { return fd_; }
    bool valid() const noexcept { return fd_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }
    // Gives up ownership: the caller closes the returned descriptor.
    int release() noexcept;
    // Closes now and reports close()'s answer; empty afterwards. ok() when empty.
    Result<void> close();
    // A second descriptor of the same open file (close-on-exec).
    Result<FileDescriptor> duplicate() const;

private:
    int fd_ = -1;
};

}  // namespace cudyn
