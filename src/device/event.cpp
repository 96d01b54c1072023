// cudyn — Event: cuEventCreate events, recorded, waited on, timed.
#include "cudyn/device/event.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "device/internal.hpp"

#include <utility>

namespace cudyn {

namespace {
constexpr detail::Operation kRecord{"Event::record"};
constexpr detail::Operation kElapsed{"Event::elapsed_ms"};
}  // namespace

Result<Event> Event::create(EventOptions options) {
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    unsigned int flags = options.timing ? 0u : unsigned{CU_EVENT_DISABLE_TIMING};
    if (options.blocking_sync) flags |= unsigned{CU_EVENT_BLOCKING_SYNC};
    CUevent event = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuEventCreate_v2000, &event, flags));
    return Event(event, options.timing, std::move(context));
}

Result<void> Event::require(const char* operation) const {
    if (!empty()) return ok();
    return detail::Operation{operation}.invalid("the event is empty (moved from or destroyed)");
}

Result<void> Event::record(StreamRef stream) {
    CUDYN_TRY(require(kRecord.name()));
    // A created stream names its context; a default stream means "the
    // current context's", which for a record must be the event's own.
    CUcontext in = stream.context_handle();
    const CUcontext mine = held_->context.handle();
    if (in != nullptr && mine != nullptr && in != mine)
        return kRecord.invalid("the stream belongs to another context than the event (the driver records an "
                               "event only on a stream of its own context)");
    if (in == nullptr && stream.is_default()) in = mine;
    return detail::in_context(in, [&] { return call_driver(&DriverTable::cuEventRecord_v2000, handle(), stream.handle()); });
}

Result<void> Event::wait(StreamRef stream) const {
    CUDYN_TRY(require("Event::wait"));
    return detail::in_stream_context(
        stream, [&] { return call_driver(&DriverTable::cuStreamWaitEvent_v3020, stream.handle(), handle(), 0u); });
}

Result<bool> Event::query() const {
    CUDYN_TRY(require("Event::query"));
    return detail::completion(call_driver(&DriverTable::cuEventQuery_v2000, handle()));
}

Result<void> Event::synchronize() const {
    CUDYN_TRY(require("Event::synchronize"));
    return call_driver(&DriverTable::cuEventSynchronize_v2000, handle());
}

Result<float> Event::elapsed_ms(const Event& start, const Event& end) {
    if (start.empty()) return kElapsed.invalid("the start event is empty (moved from or destroyed)");
    if (end.empty()) return kElapsed.invalid("the end event is empty (moved from or destroyed)");
    if (!start.timing()) return kElapsed.invalid("the start event was created without timing (EventOptions::timing)");
    if (!end.timing()) return kElapsed.invalid("the end event was created without timing (EventOptions::timing)");
    float ms = 0.0f;
    CUDYN_TRY(call_driver(&DriverTable::cuEventElapsedTime_v2000, &ms, start.handle(), end.handle()));
    return ms;
}

Result<void> Event::Held::release() {
    return context.release_into([this] { return call_driver(&DriverTable::cuEventDestroy_v4000, event); },
                                [this] { *this = Held{}; });
}

}  // namespace cudyn
