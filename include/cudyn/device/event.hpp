// cudyn — Event: an owned CUDA event for ordering streams and timing work.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/device/stream_ref.hpp"

#include <cuda.h>

#include <utility>

namespace cudyn {

// How an Event is created. Timing costs the driver a timestamp per record, so
// events that only order streams may turn it off; a blocking-sync event makes
// synchronize() sleep instead of spinning.
struct EventOptions {
    bool timing = true;          // false: CU_EVENT_DISABLE_TIMING (elapsed_ms refuses)
    bool blocking_sync = false;  // CU_EVENT_BLOCKING_SYNC
};

// Move-only owner of a cuEventCreate event. It keeps the context it was
// created in (owner_context.hpp) and is destroyed there, whatever context the
// destroying thread has. Destruction does not wait: the driver frees the
// event once its last record is done.
class Event {
public:
    // A new event in the calling thread's current context.
    static Result<Event> create(EventOptions options = {});

    Event() noexcept = default;  // empty

    // cuEventRecord: the event completes when the work enqueued on `stream`
    // so far does. The stream's context is made current for the call (the
    // driver refuses an event of one context on a stream of another:
    // InvalidArgument, before the driver, when both are known).
    Result<void> record(StreamRef stream);
    // cuStreamWaitEvent: work enqueued on `stream` afterwards waits, on the
    // device, for the last record (any context's stream may wait).
    Result<void> wait(StreamRef stream) const;
    // cuEventQuery: true once the last record has completed (or never recorded).
    Result<bool> query() const;
    // cuEventSynchronize: blocks until the last record has completed.
    Result<void> synchronize() const;

    // Milliseconds between the last records of `start` and `end`
    // (cuEventElapsedTime), about 0.5 µs resolution. Before the driver:
    // InvalidArgument for an empty event or one created without timing.
    // The driver answers CUDA_ERROR_NOT_READY (as ErrorCode::Driver) while
    // either record is pending, and INVALID_HANDLE for a never-recorded one.
    static Result<float> elapsed_ms(const Event& start, const Event& end);

    CUevent handle() const noexcept { return held_->event; }
    bool empty() const noexcept { return held_.empty(); }
    bool timing() const noexcept { return held_->timing; }
    // The context it was created in (and is destroyed in).
    const detail::OwnerContext& context() const noexcept { return held_->context; }

    // Destroys now and reports the driver's answer; empty afterwards or, when
    // the driver refused, unchanged (destroy() may be retried).
    Result<void> destroy() { return held_.release(); }

private:
    struct Held {
        CUevent event = nullptr;
        bool timing = false;
        detail::OwnerContext context;

        bool empty() const noexcept { return event == nullptr; }
        Result<void> release();  // cuEventDestroy in its context
    };
    Event(CUevent event, bool timing, detail::OwnerContext context) noexcept
        : held_(Held{event, timing, std::move(context)}) {}
    Result<void> require(const char* operation) const;
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
