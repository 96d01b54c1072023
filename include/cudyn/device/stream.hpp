// cudyn — a CUDA stream: owned streams and the two default-stream handles.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <utility>

namespace cudyn {

// An owned stream keeps the context it was created in (owner_context.hpp) and
// is destroyed in it. Destroying a stream does not wait: work already on it
// still runs (the driver frees the stream once it is done).
class Stream {
public:
    // A new stream in the current context; it does not synchronise with the
    // legacy default stream unless `blocking` is true.
    static Result<Stream> create(bool blocking = false);
    // Non-owning handles. Table entries are resolved in their legacy-stream
    // form; per-thread ordering is chosen by passing per_thread_default().
    static Stream legacy_default() noexcept { return Stream(CU_STREAM_LEGACY, false); }
    static Stream per_thread_default() noexcept { return Stream(CU_STREAM_PER_THREAD, false); }

    // Move-only; the destructor destroys an owned stream, silently.

    // Blocks until the work enqueued so far is done (for the legacy default
    // stream: and the work before it on blocking streams).
    Result<void> synchronize() const;
    // true when the work enqueued so far is done, false while it runs (cuStreamQuery).
    Result<bool> query() const;
    // Destroys an owned stream now and reports the driver's answer; when the
    // driver refused, the stream is still owned and destroy() may be retried.
    Result<void> destroy() { return held_.release(); }

    CUstream handle() const noexcept { return held_->stream; }
    bool owned() const noexcept { return held_->owned; }
    // The context an owned stream was created in (empty for the default-stream
    // handles): owners of stream-ordered memory share it rather than asking
    // the driver for the current context.
    const detail::OwnerContext& context() const noexcept { return held_->context; }

private:
    struct Held {
        CUstream stream = nullptr;
        bool owned = false;            // false: a default-stream handle, nothing to destroy
        detail::OwnerContext context;  // owned streams: the context they were created in

        bool empty() const noexcept { return !owned; }
        Result<void> release();  // cuStreamDestroy in its context
    };
    Stream(CUstream stream, bool owned) noexcept : held_(Held{stream, owned, {}}) {}
    Stream(CUstream stream, detail::OwnerContext context) noexcept : held_(Held{stream, true, std::move(context)}) {}
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
