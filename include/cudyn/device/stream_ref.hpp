// cudyn — StreamRef: the stream argument of stream-ordered operations, taken
// from a cudyn::Stream or a raw CUstream alike (never owning).
#pragma once

#include "cudyn/device/stream.hpp"

#include <cuda.h>

namespace cudyn {

class StreamRef {
public:
    StreamRef(const Stream& stream) noexcept
        : handle_(stream.handle()), context_(stream.context().empty() ? nullptr : &stream.context()) {}
    StreamRef(CUstream stream) noexcept : handle_(stream) {}
    // A raw handle with the context its work runs in (a stream an owner
    // recorded, whose context it knows): operations make it current.
    StreamRef(CUstream stream, CUcontext context) noexcept : handle_(stream), bound_(context) {}

    CUstream handle() const noexcept { return handle_; }
    // The context of an owned cudyn::Stream (the one its work runs in), null
    // for a raw handle or a default stream.
    const detail::OwnerContext* context() const noexcept { return context_; }
    // The context the stream's work runs in, where known (an owned Stream, or
    // a handle given with its context); null otherwise. Every operation that
    // takes a stream makes this context current for its driver calls (and
    // puts the caller's back), so a stream of another device works whatever
    // context the thread has; with null it runs in the thread's context.
    // Stream-ordered allocation and free need no current context on a
    // created stream (the driver reads the device from the stream): they
    // switch only for a default stream.
    CUcontext context_handle() const noexcept { return context_ != nullptr ? context_->handle() : bound_; }
    // The legacy NULL stream, as the table's legacy-stream entries read 0.
    bool is_legacy_default() const noexcept { return handle_ == nullptr || handle_ == CU_STREAM_LEGACY; }
    // Either default stream (legacy or per-thread): work on it runs in the
    // calling thread's current context, which the handle does not name.
    bool is_default() const noexcept { return is_legacy_default() || handle_ == CU_STREAM_PER_THREAD; }

private:
    CUstream handle_;
    const detail::OwnerContext* context_ = nullptr;
    CUcontext bound_ = nullptr;
};

}  // namespace cudyn
