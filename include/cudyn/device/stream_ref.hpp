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

    CUstream handle() const noexcept { return handle_; }
    // The context of an owned cudyn::Stream (the one its work runs in), null
    // for a raw handle or a default stream.
    const detail::OwnerContext* context() const noexcept { return context_; }
    // The legacy NULL stream, as the table's legacy-stream entries read 0.
    bool is_legacy_default() const noexcept { return handle_ == nullptr || handle_ == CU_STREAM_LEGACY; }
    // Either default stream (legacy or per-thread): work on it runs in the
    // calling thread's current context, which the handle does not name.
    bool is_default() const noexcept { return is_legacy_default() || handle_ == CU_STREAM_PER_THREAD; }

private:
    CUstream handle_;
    const detail::OwnerContext* context_ = nullptr;
};

}  // namespace cudyn
