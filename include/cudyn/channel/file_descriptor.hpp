// cudyn — FileDescriptor: owns one POSIX file descriptor (a VMM allocation
// exported as CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, a socket) and closes
// it once. Move-only. On Windows the type exists but nothing produces one.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <utility>

namespace cudyn {

class FileDescriptor {
public:
    FileDescriptor() noexcept = default;  // empty (-1); move-only, closed (silently) on destruction
    // Takes ownership of `fd` (-1: empty).
    explicit FileDescriptor(int fd) noexcept : owner_(Traits::State{fd}) {}

    int get() const noexcept { return owner_.get().fd; }
    bool valid() const noexcept { return !owner_.empty(); }
    explicit operator bool() const noexcept { return valid(); }
    // Gives up ownership: the caller closes the returned descriptor.
    int release() noexcept { return std::exchange(owner_.get().fd, -1); }
    // Closes now and reports close()'s answer; empty afterwards. ok() when empty.
    Result<void> close() { return owner_.release(); }
    // A second descriptor of the same open file (close-on-exec).
    Result<FileDescriptor> duplicate() const;

private:
    struct Traits {
        struct State {
            int fd = -1;
        };
        static bool empty(const State& state) noexcept { return state.fd < 0; }
        // Forgets the descriptor before closing it, whatever close() answers:
        // on Linux the descriptor is gone even when close() reports EINTR, and
        // a retry could close one another thread has just been given.
        static Result<void> release(State& state);
    };
    detail::UniqueHandle<Traits> owner_;
};

}  // namespace cudyn
