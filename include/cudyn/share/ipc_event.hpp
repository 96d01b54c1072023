// cudyn — IPC events: GPU-side ordering between processes, so that one
// process's stream waits for another's work without polling memory.
//
// Events are created with CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, the
// only flags CUDA shares. A wait refers to the exporter's last record at the
// time of the wait, so tell the importer after record() returns (over an
// FdChannel, say); waiting on a never-recorded event completes at once. The
// exporter keeps its event alive while importers may use theirs.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/record_access.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/share/ipc_handle.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace cudyn {

class IpcEvent;

// An event handle with its exporter's identity: 96 bytes on the wire.
class IpcEventDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 96;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    // InvalidArgument naming the problem (length, magic, version, ...).
    static Result<IpcEventDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const IpcEventHandle& handle() const noexcept { return fields_.handle; }
    std::uint64_t exporter_pid() const noexcept { return fields_.exporter.pid(); }
    bool exported_by_this_process() const noexcept { return fields_.exporter.is_this_process(); }

private:
    friend struct detail::RecordAccess;
    struct Fields {
        detail::ExporterIdentity exporter;
        IpcEventHandle handle;
    };
    IpcEventDescriptor() = default;
    Fields fields_;
};

class IpcEvent {
public:
    // A new IPC event in the current context.
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

    CUevent handle() const noexcept { return held_->event; }
    bool empty() const noexcept { return held_.empty(); }
    bool imported() const noexcept { return held_->imported; }  // from import_ipc_event(), not create()

    // Destroys now and reports the driver's answer; empty afterwards, or,
    // when the driver refused, unchanged (destroy() may be retried).
    Result<void> destroy() { return held_.release(); }

private:
    friend Result<IpcEvent> import_ipc_event(const IpcEventDescriptor& descriptor);
    struct Held {
        CUevent event = nullptr;
        bool imported = false;
        detail::OwnerContext context;  // the context it was created or imported in; destroyed there

        bool empty() const noexcept { return event == nullptr; }
        Result<void> release();  // cuEventDestroy in its context
    };
    IpcEvent(CUevent event, bool imported, detail::OwnerContext context) noexcept
        : held_(Held{event, imported, std::move(context)}) {}
    Result<void> require(const char* operation) const;
    detail::UniqueHandle<Held> held_;
};

// cuIpcGetEventHandle. InvalidArgument for an imported (not created) event:
// pass on the descriptor it was imported from instead.
Result<IpcEventDescriptor> export_ipc_event(const IpcEvent& event);
// Another process's event (cuIpcOpenEventHandle) in the current context.
// InvalidArgument, before any driver call, for a descriptor this process
// exported.
Result<IpcEvent> import_ipc_event(const IpcEventDescriptor& descriptor);

}  // namespace cudyn
