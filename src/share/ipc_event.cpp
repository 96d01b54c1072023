// cudyn — IpcEvent and IpcEventDescriptor.
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "device/internal.hpp"

#include "core/process_identity.hpp"
#include "core/wire_format.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace {
constexpr const char* kWhat = "IpcEventDescriptor";
constexpr unsigned int kFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
}  // namespace

// ---- descriptor ------------------------------------------------------------------------------

bool IpcEventDescriptor::exported_by_this_process() const noexcept {
    return detail::is_this_process(exporter_pid_, exporter_token_);
}

namespace detail {
template <>
struct WireLayout<IpcEventDescriptor> {
    static constexpr char kMagic[9] = "CUDYNIPE";
    static constexpr const char* kName = kWhat;
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& descriptor) {
        wire.u64(descriptor.exporter_pid_);
        wire.u64(descriptor.exporter_token_);
        wire.handle(descriptor.handle_);
    }
};
}  // namespace detail

IpcEventDescriptor::Bytes IpcEventDescriptor::to_bytes() const noexcept { return detail::write_record(*this); }

Result<IpcEventDescriptor> IpcEventDescriptor::from_bytes(const void* data, std::size_t size) {
    IpcEventDescriptor descriptor;
    CUDYN_TRY(detail::read_record(data, size, descriptor));
    if (descriptor.exporter_pid_ == 0) return Error::invalid_argument(std::string(kWhat) + ": exporter process id is 0");
    if (descriptor.handle_ == IpcEventHandle())
        return Error::invalid_argument(std::string(kWhat) + ": the handle is all zero");
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
        return Error::invalid_argument(
            "import_ipc_event: the descriptor was exported by this process (use the event itself)");
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUevent event = nullptr;
    if (auto opened = call_driver(&DriverTable::cuIpcOpenEventHandle_v4010, &event, descriptor.handle().to_cu());
        !opened) {
        Error error = std::move(opened).error();
        if (error.driver_result == CUDA_ERROR_INVALID_VALUE || error.driver_result == CUDA_ERROR_INVALID_HANDLE ||
            error.driver_result == CUDA_ERROR_MAP_FAILED)
            error.message += ": the exporter may have destroyed the event or exited";
        return error;
    }
    return IpcEvent(event, true, std::move(context));
}

Result<void> IpcEvent::require(const char* operation) const {
    if (!empty()) return ok();
    return Error::invalid_argument(std::string("IpcEvent::") + operation +
                                   ": the event is empty (moved from or destroyed)");
}

Result<IpcEventDescriptor> export_ipc_event(const IpcEvent& event) {
    if (event.empty())
        return Error::invalid_argument("export_ipc_event: the event is empty (moved from or destroyed)");
    if (event.opened())
        return Error::invalid_argument(
            "export_ipc_event: this event was opened from another process; pass on the "
            "descriptor it was opened from");
    CUipcEventHandle raw{};
    CUDYN_TRY(call_driver(&DriverTable::cuIpcGetEventHandle_v4010, &raw, event.handle()));
    const detail::ProcessIdentity self = detail::this_process();
    IpcEventDescriptor descriptor;
    descriptor.handle_ = IpcEventHandle(raw);
    descriptor.exporter_pid_ = self.pid;
    descriptor.exporter_token_ = self.token;
    return descriptor;
}

Result<void> IpcEvent::record(StreamRef stream) {
    CUDYN_TRY(require("record"));
    return call_driver(&DriverTable::cuEventRecord_v2000, handle(), stream.handle());
}

Result<void> IpcEvent::wait(StreamRef stream) const {
    CUDYN_TRY(require("wait"));
    return call_driver(&DriverTable::cuStreamWaitEvent_v3020, stream.handle(), handle(), 0u);
}

Result<void> IpcEvent::synchronize() const {
    CUDYN_TRY(require("synchronize"));
    return call_driver(&DriverTable::cuEventSynchronize_v2000, handle());
}

Result<bool> IpcEvent::query() const {
    CUDYN_TRY(require("query"));
    return detail::completion(call_driver(&DriverTable::cuEventQuery_v2000, handle()));
}

Result<void> IpcEvent::Traits::release(State& state) {
    CUDYN_TRY(state.context.release_into(
        [&state] { return call_driver(&DriverTable::cuEventDestroy_v4000, state.event); }));
    state = State{};
    return ok();
}

}  // namespace cudyn
