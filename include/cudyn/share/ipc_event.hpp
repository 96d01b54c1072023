// cudyn — interprocess events: GPU-side ordering between processes, so a
// consumer waits for a producer's work without polling memory.
//
//     // producer                                  // consumer
//     auto done = IpcEvent::create();         auto done = cudyn::import_ipc_event(descriptor);
//     send(export_ipc_event(*done)->to_bytes());       ...
//     write(stream); done->record(stream);             // told "recorded" (after the record call)
//     send("recorded");                                done->wait(stream);   // stream waits on the GPU
//                                                      read(stream);
//
// Events are created with CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING,
// the only flags CUDA shares. A wait refers to the producer's last record at
// the time of the wait, so tell the consumer after record() returns (over an
// FdChannel, say); waiting on a never-recorded event completes at once.
// The producer keeps its event alive while consumers may use theirs
// (CUDA: using an opened event after the exporter destroyed it is undefined).
#pragma once

#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/device/stream_ref.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

// An event handle with the exporter's identity: 96 bytes on the wire.
class IpcEvent;

namespace detail {
template <typename Record>
struct WireLayout;  // a record's byte layout, private to the library
}  // namespace detail

class IpcEventDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 96;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    // InvalidArgument naming the problem (length, magic, version, ...).
    static Result<IpcEventDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const IpcEventHandle& handle() const noexcept { return handle_; }
    std::uint64_t exporter_pid() const noexcept { return exporter_pid_; }
    bool exported_by_this_process() const noexcept;

private:
    friend Result<IpcEventDescriptor> export_ipc_event(const IpcEvent& event);
    friend struct detail::WireLayout<IpcEventDescriptor>;
    IpcEventDescriptor() = default;
    IpcEventHandle handle_;
    std::uint64_t exporter_pid_ = 0;
    std::uint64_t exporter_token_ = 0;
};

class IpcEvent {
public:
    // A new interprocess event in the current context.
    static Result<IpcEvent> create();

    IpcEvent() noexcept = default;  // empty; move-only, cuEventDestroy (silently) on destruction

    // cuEventRecord: the event completes when the work queued on `stream` so far does.
    Result<void> record(StreamRef stream);
    // cuStreamWaitEvent: work queued on `stream` after this waits, on the GPU,
    // for the last record.
    Result<void> wait(StreamRef stream) const;
    // cuEventSynchronize: blocks the calling thread until the last record completes.
    Result<void> synchronize() const;
    // cuEventQuery: true when the last record has completed, false while it runs.
    Result<bool> query() const;

    CUevent handle() const noexcept { return owner_.get().event; }
    bool empty() const noexcept { return owner_.empty(); }
    bool opened() const noexcept { return owner_.get().opened; }  // from import_ipc_event(), not create()

    // Destroys now and reports the driver's answer; empty afterwards, or,
    // when the driver refused, unchanged (destroy() may be retried).
    Result<void> destroy() { return owner_.release(); }

private:
    friend Result<IpcEvent> import_ipc_event(const IpcEventDescriptor& descriptor);
    friend Result<IpcEventDescriptor> export_ipc_event(const IpcEvent& event);
    struct Traits {
        struct State {
            CUevent event = nullptr;
            bool opened = false;
            detail::OwnerContext context;  // the context it was created or opened in; destroyed there
        };
        static bool empty(const State& state) noexcept { return state.event == nullptr; }
        static Result<void> release(State& state);  // cuEventDestroy in its context
    };
    IpcEvent(CUevent event, bool opened, detail::OwnerContext context) noexcept
        : owner_(Traits::State{event, opened, std::move(context)}) {}
    Result<void> require(const char* operation) const;
    detail::UniqueHandle<Traits> owner_;
};

// cuIpcGetEventHandle. InvalidArgument for an opened (not created) event:
// pass on the descriptor it was opened from instead.
Result<IpcEventDescriptor> export_ipc_event(const IpcEvent& event);
// Another process's event (cuIpcOpenEventHandle) in the current context.
// InvalidArgument, before any driver call, for a descriptor this process
// exported.
Result<IpcEvent> import_ipc_event(const IpcEventDescriptor& descriptor);

}  // namespace cudyn
