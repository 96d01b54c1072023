// What a process can learn and do about its memory and devices as a whole:
// the memory ledger's snapshot, a device's capability fingerprint (the
// schema of `cudyn-info --json`), and checkpoint/restore of another process.
#include "bindings.hpp"
#include "owner.hpp"

#include <cudyn/checkpoint/process_checkpoint.hpp>
#include <cudyn/checkpoint/process_state.hpp>
#include <cudyn/core/memory_ledger.hpp>
#include <cudyn/device/capability_fingerprint.hpp>
#include <cudyn/device/device.hpp>

#include <chrono>
#include <cmath>
#include <string>

namespace cudyn_python {
namespace {

py::dict ledger_snapshot() {
    const cudyn::LedgerSnapshot snapshot = cudyn::ledger::snapshot();
    py::list entries;
    for (const cudyn::LedgerEntry& entry : snapshot.entries) {
        py::dict row;
        row["kind"] = cudyn::to_string(entry.kind);
        row["device"] = entry.device;
        row["live_bytes"] = entry.live_bytes;
        row["live_count"] = entry.live_count;
        row["peak_bytes"] = entry.peak_bytes;
        row["total_allocations"] = entry.total_allocations;
        entries.append(row);
    }
    py::dict result;
    result["enabled"] = snapshot.enabled;
    result["live_bytes"] = snapshot.live_bytes();
    result["entries"] = entries;
    return result;
}

std::string ptx_isa_text(int isa) { return isa == 0 ? "" : std::to_string(isa / 10) + "." + std::to_string(isa % 10); }

// The "fingerprint" object of `cudyn-info --json` (docs/cudyn-info.schema.json).
py::dict fingerprint(int ordinal, double trial_timeout) {
    cudyn::FingerprintOptions options;
    options.trial_timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(trial_timeout * 1000.0)));
    const cudyn::Device device = unwrap(cudyn::Device::get(ordinal));
    const cudyn::CapabilityFingerprint found = call_unlocked([&] { return cudyn::fingerprint_device(device, options); });
    py::dict trials;
    for (const cudyn::CapabilityTrialInfo& info : cudyn::capability_trial_list) {
        const cudyn::TrialResult& trial = found.*info.field;
        py::dict item;
        item["outcome"] = cudyn::to_string(trial.outcome);
        item["driver_result"] = cudyn::cuda_error_name(trial.driver_result);
        item["ms"] = trial.milliseconds;
        item["detail"] = trial.detail;
        trials[info.name] = item;
    }
    py::dict result;
    result["version"] = cudyn::CapabilityFingerprint::kVersion;
    result["newest_ptx_isa"] = ptx_isa_text(found.newest_ptx_isa);
    result["trials"] = trials;
    return result;
}

std::chrono::milliseconds seconds(double value, const char* operation) {
    if (!(value >= 0) || !std::isfinite(value))
        raise_invalid(std::string(operation) + ": timeout must be a finite number of seconds >= 0");
    return std::chrono::milliseconds(static_cast<long long>(std::ceil(value * 1000.0)));
}

}  // namespace

void bind_state(py::module_& module) {
    module.def("ledger_snapshot", &ledger_snapshot,
               "What every cudyn owner of memory holds now, as a dict: enabled, live_bytes and one entry per "
               "(kind, device) with live_bytes, live_count, peak_bytes, total_allocations.");
    module.def("ledger_reset_peaks", &cudyn::ledger::reset_peaks, "Starts every peak_bytes again from live_bytes.");
    module.def("fingerprint_device", &fingerprint, py::arg("device") = 0, py::kw_only(), py::arg("trial_timeout") = 5.0,
               "Tries each capability on the device and returns what worked, as a dict with the schema of "
               "cudyn-info --json's \"fingerprint\" (version, newest_ptx_isa, trials: {name: {outcome, "
               "driver_result, ms, detail}}). The trials run with the GIL released.");
    module.def(
        "process_state", [](int pid) { return cudyn::to_string(unwrap(cudyn::process_state(pid))); }, py::arg("pid"),
        "The checkpoint state of process `pid`: 'running', 'locked', 'checkpointed' or 'failed'.");

    py::class_<cudyn::ProcessCheckpoint>(module, "ProcessCheckpoint", R"doc(
Checkpoint and restore of another process's CUDA state: lock(pid), then
checkpoint() (its device memory moves to host memory), restore(), unlock()
(or finish(), which does what is left). Every step waits with the GIL
released. Leaving a with block finishes.)doc")
        .def_static(
            "lock",
            [](int pid, py::object timeout) {
                if (timeout.is_none()) return call_unlocked([&] { return cudyn::ProcessCheckpoint::lock(pid); });
                const auto wait = seconds(timeout.cast<double>(), "ProcessCheckpoint.lock");
                return call_unlocked([&] { return cudyn::ProcessCheckpoint::lock(pid, wait); });
            },
            py::arg("pid"), py::arg("timeout") = py::none(),
            "Locks process `pid`'s CUDA calls (waiting up to `timeout` seconds for its running work).")
        .def("checkpoint", [](cudyn::ProcessCheckpoint& self) { call_unlocked([&] { return self.checkpoint(); }); })
        .def("restore", [](cudyn::ProcessCheckpoint& self) { call_unlocked([&] { return self.restore(); }); })
        .def("unlock", [](cudyn::ProcessCheckpoint& self) { call_unlocked([&] { return self.unlock(); }); })
        .def("finish", [](cudyn::ProcessCheckpoint& self) { call_unlocked([&] { return self.finish(); }); },
             "Restores if checkpointed and unlocks if locked: the process runs again.")
        .def_property_readonly("pid", &cudyn::ProcessCheckpoint::pid)
        .def_property_readonly("state", [](const cudyn::ProcessCheckpoint& self) { return cudyn::to_string(self.state()); })
        .def_property_readonly(
            "failure",
            [](const cudyn::ProcessCheckpoint& self) -> py::object {
                if (!self.failure()) return py::none();
                py::dict result;
                result["step"] = cudyn::to_string(self.failure()->step);
                result["error"] = self.failure()->error.describe();
                result["state_after"] = self.failure()->state_after ? py::object(py::str(cudyn::to_string(*self.failure()->state_after)))
                                                                     : py::object(py::none());
                return result;
            },
            "The step that failed, its error and the state read after it; None when none failed.")
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](cudyn::ProcessCheckpoint& self, py::args) {
            call_unlocked([&] { return self.finish(); });
        });
}

}  // namespace cudyn_python
