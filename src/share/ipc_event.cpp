// cudyn — IpcEvent and IpcEventDescriptor.
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "device/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace detail {
template <>
struct WireLayout<IpcEventDescriptor> {
    static constexpr char kMagic[9] = "CUDYNIPE";
    static constexpr const char* kName = "IpcEventDescriptor";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        auto& f = RecordAccess::fields(descriptor);
        wire.exporter(f.exporter);
        wire.handle(f.handle);
    }
};
}  // namespace detail

namespace {
constexpr unsigned int kFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
constexpr detail::Operation kExport{"export_ipc_event"};
constexpr detail::Operation kImport{"import_ipc_event"};
}  // namespace

// ---- descriptor ------------------------------------------------------------------------------

IpcEventDescriptor::Bytes IpcEventDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<IpcEventDescriptor> IpcEventDescriptor::from_bytes(const void* data, std::size_t size) {
    return detail::parse_record<IpcEventDescriptor>(data, size);
}

Result<IpcEventDescriptor> export_ipc_event(const IpcEvent& event) {
    if (event.empty()) return kExport.invalid("the event is empty (moved from or destroyed)");
    if (event.imported())
        return kExport.invalid("this event was imported from another process; pass on the descriptor it was "
                               "imported from");
    auto descriptor = detail::RecordAccess::make<IpcEventDescriptor>();
    auto& fields = detail::RecordAccess::fields(descriptor);
    CUDYN_TRY(call_driver(&DriverTable::cuIpcGetEventHandle_v4010, fields.handle.driver_output(), event.handle()));
    fields.exporter = detail::RecordAccess::this_exporter();
    return descriptor;
}

// ---- event -----------------------------------------------------------------------------------

Result<IpcEvent> IpcEvent::create() {
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUevent event = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuEventCreate_v2000, &event, kFlags));
    return IpcEvent(event, false, std::move(context));
}

Result<IpcEvent> import_ipc_event(const IpcEventDescriptor& descriptor) {
    if (descriptor.exported_by_this_process())
        return kImport.invalid("the descriptor was exported by this process (use the event itself)");
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUevent event = nullptr;
    if (auto imported = call_driver(&DriverTable::cuIpcOpenEventHandle_v4010, &event, descriptor.handle().to_cu());
        !imported) {
        Error error = std::move(imported).error();
        if (error.driver_result == CUDA_ERROR_INVALID_VALUE || error.driver_result == CUDA_ERROR_INVALID_HANDLE ||
            error.driver_result == CUDA_ERROR_MAP_FAILED)
            error.message += ": the exporter may have destroyed the event or exited";
        return error;
    }
    return IpcEvent(event, true, std::move(context));
}

Result<void> IpcEvent::require(const char* operation) const {
    if (!empty()) return ok();
    return detail::Operation{operation}.invalid("the event is empty (moved from or destroyed)");
}

Result<void> IpcEvent::record(StreamRef stream) {
    CUDYN_TRY(require("IpcEvent::record"));
    // A default stream means the current context's: the event's own.
    const CUcontext in = stream.context_handle() != nullptr ? stream.context_handle()
                         : stream.is_default()               ? held_->context.handle()
                                                             : nullptr;
    return detail::in_context(in, [&] { return call_driver(&DriverTable::cuEventRecord_v2000, handle(), stream.handle()); });
}

Result<void> IpcEvent::wait(StreamRef stream) const {
    CUDYN_TRY(require("IpcEvent::wait"));
    return detail::in_stream_context(
        stream, [&] { return call_driver(&DriverTable::cuStreamWaitEvent_v3020, stream.handle(), handle(), 0u); });
}

Result<void> IpcEvent::synchronize() const {
    CUDYN_TRY(require("IpcEvent::synchronize"));
    return call_driver(&DriverTable::cuEventSynchronize_v2000, handle());
}

Result<bool> IpcEvent::query() const {
    CUDYN_TRY(require("IpcEvent::query"));
    return detail::completion(call_driver(&DriverTable::cuEventQuery_v2000, handle()));
}

Result<void> IpcEvent::Held::release() {
    return context.release_into([this] { return call_driver(&DriverTable::cuEventDestroy_v4000, event); },
                                [this] { *this = Held{}; });
}

}  // namespace cudyn
