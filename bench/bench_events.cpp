// cudyn-bench — events and peer access: cudyn's Event and enable_peer_access
// against the same driver entries called raw (the table's function pointers,
// none of cudyn's checks or context handling), in the same run.
#include "harness.hpp"
#include "peer_fixture.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/event.hpp"
#include "cudyn/device/peer_access.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"

#include <optional>
#include <string>
#include <utility>

namespace cudyn::bench {

namespace {

// Device 0's primary context current, a created stream, and two events of
// each side, kept for the whole run (releasing the primary context between
// cases would tear it down).
struct EventFixture {
    PrimaryContext context;
    Stream stream;
    Event start;
    Event end;
    CUevent raw_start = nullptr;
    CUevent raw_end = nullptr;
};

Result<EventFixture> make_event_fixture() {
    CUDYN_TRY_ASSIGN(auto device, Device::get(0));
    CUDYN_TRY_ASSIGN(auto context, PrimaryContext::activate(device));
    CUDYN_TRY_ASSIGN(auto stream, Stream::create());
    CUDYN_TRY_ASSIGN(auto start, Event::create());
    CUDYN_TRY_ASSIGN(auto end, Event::create());
    EventFixture made{std::move(context), std::move(stream), std::move(start), std::move(end), nullptr, nullptr};
    // The raw side's events: never destroyed (they live as long as the run).
    CUDYN_TRY(call_driver(&DriverTable::cuEventCreate_v2000, &made.raw_start, 0u));
    CUDYN_TRY(call_driver(&DriverTable::cuEventCreate_v2000, &made.raw_end, 0u));
    return made;
}

EventFixture* event_fixture(std::string& error) {
    static std::optional<Result<EventFixture>> made;
    if (!made) made.emplace(make_event_fixture());
    if (!made->has_value()) {
        error = made->error().describe();
        return nullptr;
    }
    return &made->value();
}

// cuEventRecord on a created stream whose context is current, then
// cuEventQuery: what a program polling for completion does. cudyn's record
// adds the stream-context check (one cuCtxGetCurrent).
CaseResult record_query(const Settings& settings) {
    std::string error;
    EventFixture* f = event_fixture(error);
    if (f == nullptr) return skipped(error);
    const DriverTable& cu = driver();
    const CUstream stream = f->stream.handle();
    const CUevent raw_event = f->raw_start;
    const auto answered = [](CUresult rc) { return rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY; };
    auto raw = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            wrong += cu.cuEventRecord_v2000(raw_event, stream) != CUDA_SUCCESS;
            wrong += !answered(cu.cuEventQuery_v2000(raw_event));
        }
        return wrong;
    };
    auto wrapped = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            wrong += !f->start.record(f->stream).has_value();
            wrong += !f->start.query().has_value();
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 200000, raw, wrapped);
    if (result.status != Status::Ok) return result;
    if (auto done = f->stream.synchronize(); !done) return failed(done.error().describe());
    result.operation = "cuEventRecord (created stream, its context current) + cuEventQuery";
    result.unit = "ns/op";
    result.notes.push_back("cudyn's record asks cuCtxGetCurrent once to run in the stream's context (no switch here)");
    return result;
}

// cuEventElapsedTime of two completed records: cudyn adds its checks (both
// events live, both timed) and no driver call.
CaseResult elapsed_time(const Settings& settings) {
    std::string error;
    EventFixture* f = event_fixture(error);
    if (f == nullptr) return skipped(error);
    const DriverTable& cu = driver();
    const CUstream stream = f->stream.handle();
    for (CUevent event : {f->raw_start, f->raw_end})
        if (cu.cuEventRecord_v2000(event, stream) != CUDA_SUCCESS) return failed("raw cuEventRecord failed");
    for (Event* event : {&f->start, &f->end})
        if (auto recorded = event->record(f->stream); !recorded) return failed(recorded.error().describe());
    if (auto done = f->stream.synchronize(); !done) return failed(done.error().describe());
    const CUevent raw_start = f->raw_start;
    const CUevent raw_end = f->raw_end;
    auto raw = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            float ms = -1.0f;
            wrong += cu.cuEventElapsedTime_v2000(&ms, raw_start, raw_end) != CUDA_SUCCESS || ms < 0.0f;
        }
        return wrong;
    };
    auto wrapped = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            auto ms = Event::elapsed_ms(f->start, f->end);
            wrong += !ms.has_value() || *ms < 0.0f;
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 1000000, raw, wrapped);
    if (result.status != Status::Ok) return result;
    result.operation = "cuEventElapsedTime of two completed records";
    result.unit = "ns/call";
    return result;
}

// Enabling access that is not enabled (then disabling it, so each iteration
// starts the same): the driver maps the peer's memory, so this is the call a
// program pays once per pair. cudyn adds cuDeviceCanAccessPeer and the
// context switch checks (one cuCtxGetCurrent each for enable and disable).
CaseResult peer_enable_first(const Settings& settings) {
    std::string error;
    PeerFixture* f = peer_fixture(error);
    if (f == nullptr) return skipped(error);
    const DriverTable& cu = driver();
    const CUcontext peer = f->context1.handle();
    auto raw = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            wrong += cu.cuCtxEnablePeerAccess_v4000(peer, 0u) != CUDA_SUCCESS;
            wrong += cu.cuCtxDisablePeerAccess_v4000(peer) != CUDA_SUCCESS;
        }
        return wrong;
    };
    auto wrapped = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            wrong += !enable_peer_access(f->context0, f->context1).has_value();
            wrong += !disable_peer_access(f->context0, f->context1).has_value();
        }
        return wrong;
    };
    CaseResult result = compare_loops(settings, 50, raw, wrapped);
    if (result.status != Status::Ok) return result;
    result.operation = "cuCtxEnablePeerAccess (not enabled) + cuCtxDisablePeerAccess, device 0 -> 1";
    result.unit = "ns/pair";
    return result;
}

// Enabling access that is already enabled: the driver answers
// PEER_ACCESS_ALREADY_ENABLED, which cudyn turns into success. What a
// program that enables "to be sure" before each use pays.
CaseResult peer_enable_again(const Settings& settings) {
    std::string error;
    PeerFixture* f = peer_fixture(error);
    if (f == nullptr) return skipped(error);
    if (auto enabled = enable_peer_access(f->context0, f->context1); !enabled) return failed(enabled.error().describe());
    const DriverTable& cu = driver();
    const CUcontext peer = f->context1.handle();
    auto raw = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i)
            wrong += cu.cuCtxEnablePeerAccess_v4000(peer, 0u) != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
        return wrong;
    };
    auto wrapped = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) wrong += !enable_peer_access(f->context0, f->context1).has_value();
        return wrong;
    };
    CaseResult result = compare_loops(settings, 100000, raw, wrapped);
    if (auto disabled = disable_peer_access(f->context0, f->context1); !disabled)
        return failed(disabled.error().describe());
    if (result.status != Status::Ok) return result;
    result.operation = "cuCtxEnablePeerAccess, already enabled (device 0 -> 1)";
    result.unit = "ns/call";
    result.notes.push_back("cudyn adds cuCtxGetCurrent per call (cuDeviceCanAccessPeer only on a refusal)");
    return result;
}

const CaseRegistrar event_record_query({"event/record-query",
                                        "Event::record(stream) + query() vs raw cuEventRecord + cuEventQuery "
                                        "(200,000 per sample), a created stream whose context is current",
                                        true, record_query});
const CaseRegistrar event_elapsed({"event/elapsed-time",
                                   "Event::elapsed_ms vs raw cuEventElapsedTime of two completed records "
                                   "(1,000,000 per sample)",
                                   true, elapsed_time});
const CaseRegistrar peer_first({"peer/enable-first",
                                "enable_peer_access + disable_peer_access vs raw cuCtxEnablePeerAccess + "
                                "cuCtxDisablePeerAccess, device 0 -> 1 (50 pairs per sample; two devices)",
                                true, peer_enable_first});
const CaseRegistrar peer_again({"peer/enable-idempotent",
                                "enable_peer_access when already enabled vs raw cuCtxEnablePeerAccess answering "
                                "PEER_ACCESS_ALREADY_ENABLED (100,000 per sample; two devices)",
                                true, peer_enable_again});

}  // namespace

}  // namespace cudyn::bench
