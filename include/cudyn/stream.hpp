// cudyn — a CUDA stream: owned streams and the two default-stream handles.
#pragma once

#include "cudyn/owner_context.hpp"
#include "cudyn/result.hpp"

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

    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream();  // destroys an owned stream; silent on failure

    // Blocks until the work enqueued so far is done (for the legacy default
    // stream: and the work before it on blocking streams).
    Result<void> synchronize() const;
    // true when the work enqueued so far is done, false while it runs (cuStreamQuery).
    Result<bool> query() const;
    // Destroys an owned stream now and reports the driver's answer; when the
    // driver refused, the stream is still owned and destroy() may be retried.
    Result<void> destroy();

    CUstream handle() const noexcept { return stream_; }
    bool owned() const noexcept { return owned_; }

private:
    Stream(CUstream stream, bool owned) noexcept : stream_(stream), owned_(owned) {}
    Stream(CUstream stream, detail::OwnerContext context) noexcept
        : stream_(stream), owned_(true), context_(std::move(context)) {}
    void forget() noexcept;  // lets go without the driver (a destructor's last resort)
    CUstream stream_ = nullptr;
    bool owned_ = false;
    detail::OwnerContext context_;  // owned streams: the context they were created in
};

}  // namespace cudyn
