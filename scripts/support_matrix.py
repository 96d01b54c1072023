#!/usr/bin/env python3
"""The support matrix (docs/support-matrix.md): which cudyn feature works on which driver.

Every column is measured, never typed in: cudyn-info --json is run against each
fake driver variant of a build folder (and against a path that does not
exist), and the real driver's column comes from a cudyn-info --json captured on
a GPU machine (docs/measurements/cudyn-info-*.json). A feature's cell follows
from the entry points that resolved and device 0's capabilities, by the same
rules the library applies before calling the driver.

    support_matrix.py BUILD_DIR REAL_JSON --print          # the table
    support_matrix.py BUILD_DIR REAL_JSON --write docs/support-matrix.md  # replace it between the markers
    support_matrix.py BUILD_DIR REAL_JSON --check docs/support-matrix.md  # exit 1 if the page differs
"""
import json
import os
import subprocess
import sys

BEGIN = "<!-- support-matrix:begin (scripts/support_matrix.py --write) -->"
END = "<!-- support-matrix:end -->"

# (column title, fake variant folder or None for "no driver at all")
FAKE_COLUMNS = [
    ("fake 13.0 (`emulated`)", "emulated"),
    ("fake 12.8 (`cuda12`)", "cuda12"),
    ("fake 11.8 (`cuda11`)", "cuda11"),
    ("fake 10.1 (`legacy`)", "legacy"),
    ("toolkit stub (fake `stub`)", "stub"),
    ("`cuInit` fails (fake `broken`)", "broken"),
    ("no driver", None),
]

# Why nothing works, by load state: the ErrorCode every call returns.
UNUSABLE = {
    "not_found": "DriverNotFound",
    "stub": "StubDriver",
    "init_failed": "DriverInitFailed",
    "refused": "DriverRefused",
}


def cudyn_info(build_dir, variant):
    path = (os.path.join(build_dir, "tests", "fakecuda", variant, "libcuda.so.1") if variant
            else "/nonexistent/cudyn-support-matrix/libcuda.so.1")
    env = dict(os.environ, CUDYN_DRIVER_PATH=path, FAKECUDA_DEVICES="1")
    tool = os.path.join(build_dir, "tools", "cudyn-info")
    out = subprocess.run([tool, "--json"], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


class Driver:
    """One cudyn-info report, asked the questions the library asks."""

    def __init__(self, report):
        self.report = report
        self.resolved = {(e["name"], e["version"]) for e in report["entry_points"] if e["resolved"]}
        devices = report.get("devices") or []
        self.capabilities = devices[0]["capabilities"] if devices else {}
        self.fingerprint = devices[0].get("fingerprint") if devices else None

    def unusable(self):
        state = self.report["state"]
        if state != "loaded":
            return UNUSABLE.get(state, state)
        if not self.report.get("devices"):
            return "no device"
        return None

    def has(self, name, version):
        return (name, version) in self.resolved

    def listed(self, name, version):
        """False when the report predates the entry (a committed real-driver report)."""
        return any(e["name"] == name and e["version"] == version for e in self.report["entry_points"])

    def cap(self, name):
        return bool(self.capabilities.get(name))

    def predates(self, entries=(), caps=()):
        """A report written before cudyn listed these entries or capabilities
        (a committed real-driver report): its cell cannot be measured."""
        listed = {(e["name"], e["version"]) for e in self.report["entry_points"]}
        return any(e not in listed for e in entries) or any(c not in self.capabilities for c in caps)


def loader_row(d):
    if d.report["state"] != "loaded":
        return "`%s`" % d.report["state"]
    version = d.report["driver_version"]
    vias = sorted({e["via"] for e in d.report["entry_points"] if e["resolved"]})
    return "%d.%d, %d of %d entries (%s)" % (version // 1000, version % 1000 // 10, len(d.resolved),
                                             len(d.report["entry_points"]), ", ".join(vias))


def feature(check):
    """A row whose cell is the unusable driver's error, else check(d)."""
    def cell(d):
        why = d.unusable()
        return why if why else check(d)
    return cell


def yes_if(condition, otherwise="NotSupported"):
    return "yes" if condition else otherwise


# A cell of a feature newer than the committed report it comes from.
NOT_IN_REPORT = "not in this report"


def host_vmm_cell(d):
    """Plain host and host NUMA placement have an attribute each."""
    if not d.has("cuMemCreate", 10020):
        return "NotSupported"
    host, numa = d.cap("host_virtual_memory_management"), d.cap("host_numa_virtual_memory_management")
    if host and numa:
        return "yes"
    return "host only" if host else "host NUMA only" if numa else "NotSupported"


def copy_plan_cell(d):
    # The batch on a created stream (CopyPlan::path_for): the 13.0 ABI first.
    if not d.listed("cuMemcpyBatchAsync", 13000):
        return "not in this report (it predates the entry)"
    if d.has("cuMemcpyBatchAsync", 13000):
        return "one batch call (13.0 ABI)"
    if d.has("cuMemcpyBatchAsync", 12080):
        return "one batch call (12.8 ABI)"
    return "one call per copy"


def copy_3d_plan_cell(d):
    # The 3D batch in the ABI of the plan's path, else cuMemcpy3DAsync per copy.
    if d.predates([("cuMemcpy3DBatchAsync", 13000)]):
        return NOT_IN_REPORT
    if d.has("cuMemcpyBatchAsync", 13000):
        return "one 3D batch call (13.0 ABI)" if d.has("cuMemcpy3DBatchAsync", 13000) else "one call per copy"
    if d.has("cuMemcpyBatchAsync", 12080):
        return "one 3D batch call (12.8 ABI)" if d.has("cuMemcpy3DBatchAsync", 12080) else "one call per copy"
    return "one call per copy"


def discard_cell(d):
    # PrefetchPlan::add_discard / add_discard_and_prefetch: the batches where
    # the driver has them, else nothing (discard) and a prefetch.
    if d.predates([("cuMemDiscardBatchAsync", 13000)]):
        return NOT_IN_REPORT
    if d.has("cuMemDiscardBatchAsync", 13000) and d.has("cuMemDiscardAndPrefetchBatchAsync", 13000):
        return "batch calls" if d.cap("concurrent_managed_access") else "no-op / prefetch"
    return "no-op / prefetch"


def share_any_cell(d):
    # The kinds export_allocation finds (allocation_sharing.hpp): cuMemAlloc
    # memory always; VMM memory through cuMemRetainAllocationHandle and the
    # 11.7 mapping attributes; pool memory where pools exist.
    kinds = ["cuMemAlloc"]
    if d.has("cuMemRetainAllocationHandle", 11000) and d.report["driver_version"] >= 11070 and d.cap("posix_fd_handles"):
        kinds.append("VMM")
    if d.has("cuMemPoolExportPointer", 11020) and d.cap("memory_pools"):
        kinds.append("pool")
    return ", ".join(kinds) + " memory"


def fabric_cell(d):
    # The attribute alone says what the device offers; cudyn-info's
    # fabric_export trial (a real export of fabric memory) says whether it
    # ran on the machine the report comes from: no IMEX channel there, and
    # the driver refuses it whatever the attribute says.
    if not (d.has("cuMemExportToShareableHandle", 10020) and d.cap("fabric_handles")):
        return "NotSupported"
    if d.fingerprint is None or "fabric_export" not in d.fingerprint["trials"]:
        return "attribute says yes; export not tried (%s)" % NOT_IN_REPORT
    outcome = d.fingerprint["trials"]["fabric_export"]["outcome"]
    if outcome == "works":
        return "yes (an export ran here)"
    if outcome == "refused":
        return "attribute says yes; export refused here (no IMEX channel)"
    return "attribute says yes; export trial %s" % outcome


def trials_cell(d):
    # cudyn-info's trials on device 0: how many the driver really did.
    if d.fingerprint is None:
        return NOT_IN_REPORT
    trials = d.fingerprint["trials"]
    works = sum(1 for t in trials.values() if t["outcome"] == "works")
    ptx = d.fingerprint["newest_ptx_isa"]
    return "%d of %d work%s" % (works, len(trials), ", PTX ISA " + ptx if ptx else "")


STREAM_OPS_V2 = [("cuStreamWriteValue32", 11070), ("cuStreamWaitValue32", 11070), ("cuStreamBatchMemOp", 11070)]


def stream_ops_cell(d):
    # The 11.7 ABI needs no attribute; the 8.0 one only where the device
    # enables it (CAN_USE_STREAM_MEM_OPS_V1, which cudyn-info does not report).
    if d.predates(STREAM_OPS_V2):
        return NOT_IN_REPORT
    if all(d.has(name, version) for name, version in STREAM_OPS_V2):
        return "yes"
    if d.has("cuStreamWriteValue32", 8000):
        return "8.0 ABI, where the device enables it"
    return "NotSupported"


def stream_ops_wide_cell(d):
    if d.predates(STREAM_OPS_V2, ["stream_memory_ops_64_bit", "stream_wait_value_nor"]):
        return NOT_IN_REPORT
    if all(d.has(name, version) for name, version in STREAM_OPS_V2):
        wide, nor = d.cap("stream_memory_ops_64_bit"), d.cap("stream_wait_value_nor")
        return "yes" if wide and nor else ("64-bit only" if wide else ("NOR only" if nor else "NotSupported"))
    if d.has("cuStreamWriteValue32", 8000):
        return "8.0 ABI: the _V1 attributes decide"
    return "NotSupported"


ROWS = [
    ("driver loaded (version, entries resolved, how)", loader_row),
    ("`DeviceBuffer`, `DeviceSpan`, `PinnedBuffer`, `HostRegistration`", feature(lambda d: "yes")),
    ("`ZeroCopyBuffer` (zero-copy)", feature(lambda d: yes_if(d.cap("can_map_host_memory")))),
    ("`ManagedBuffer`", feature(lambda d: yes_if(d.cap("managed_memory")))),
    ("advice, `prefetch_to` a device", feature(lambda d: yes_if(d.cap("concurrent_managed_access")))),
    ("host NUMA locations in advice and prefetch",
     feature(lambda d: yes_if(d.has("cuMemAdvise", 12020) and d.has("cuMemPrefetchAsync", 12020)))),
    ("`PrefetchPlan`",
     feature(lambda d: "one batch call" if d.has("cuMemPrefetchBatchAsync", 13000) else "one call per range")),
    ("`CopyPlan`", feature(copy_plan_cell)),
    ("VMM (`AddressRange`, `PhysicalMemory`, `MappedRange`, `GrowableBuffer`)",
     feature(lambda d: yes_if(d.has("cuMemCreate", 10020) and d.cap("virtual_memory_management")))),
    ("POSIX-fd shareable handles",
     feature(lambda d: yes_if(d.has("cuMemExportToShareableHandle", 10020) and d.cap("posix_fd_handles")))),
    ("fabric handles: the attribute, and whether `cudyn-info`'s trial export ran", feature(fabric_cell)),
    ("host memory in VMM (`AllocationProperties::host()` / `host_numa(n)`)",
     feature(lambda d: host_vmm_cell(d))),
    ("dma-buf export (`export_dma_buf`)",
     feature(lambda d: NOT_IN_REPORT if d.predates([("cuMemGetHandleForAddressRange", 11070)], ["dma_buf"])
             else yes_if(d.has("cuMemGetHandleForAddressRange", 11070) and d.cap("dma_buf")))),
    ("memory pools (`MemoryPool`), `StreamOrderedBuffer`",
     feature(lambda d: yes_if(d.has("cuMemPoolCreate", 11020) and d.cap("memory_pools")))),
    ("`export_allocation` (from an address alone)", feature(share_any_cell)),
    ("whole-range sharing (`RangeExporter`, `import_range`, updates), POSIX descriptors",
     feature(lambda d: yes_if(d.has("cuMemCreate", 10020) and d.cap("virtual_memory_management")
                              and d.has("cuMemRetainAllocationHandle", 11000) and d.cap("posix_fd_handles")))),
    ("device identity (`Device::uuid`, `pci_bus_id`, `by_uuid`), `probe_topology`",
     feature(lambda d: NOT_IN_REPORT if d.predates([("cuDeviceGetP2PAtomicCapabilities", 13000)])
             else ("yes, with P2P atomic capabilities" if d.has("cuDeviceGetP2PAtomicCapabilities", 13000)
                   else "yes" if d.has("cuDeviceGetUuid", 11040) else "yes (9.2 UUID ABI)"))),
    ("capability trials (`fingerprint_device`, `cudyn-info`)", feature(trials_cell)),
    ("stream memory operations (`write_value32`, `wait_value32`, `StreamMemoryBatch`)", feature(stream_ops_cell)),
    ("64-bit values and the NOR wait in stream memory operations", feature(stream_ops_wide_cell)),
    ("`attach_to_stream` (managed memory)",
     feature(lambda d: NOT_IN_REPORT if d.predates([("cuStreamAttachMemAsync", 6000)])
             else yes_if(d.has("cuStreamAttachMemAsync", 6000) and d.cap("managed_memory")))),
    ("range-wide VMM access (`set_range_access`, `range_span_as`)",
     feature(lambda d: yes_if(d.has("cuMemSetAccess", 10020) and d.cap("virtual_memory_management")))),
    ("`ImportedPoolMemory::free(stream)`",
     feature(lambda d: yes_if(d.has("cuMemPoolImportPointer", 11020) and d.has("cuMemFreeAsync", 11020)
                              and d.cap("memory_pools")))),
    ("`Event` (record, wait, query, elapsed time)", feature(lambda d: "yes")),
    ("peer access, P2P attributes, `copy_peer`",
     feature(lambda d: NOT_IN_REPORT if d.predates([("cuCtxEnablePeerAccess", 4000), ("cuDeviceGetP2PAttribute", 8000)])
             else yes_if(d.has("cuCtxEnablePeerAccess", 4000) and d.has("cuDeviceGetP2PAttribute", 8000)
                         and d.has("cuMemcpyPeerAsync", 4000)))),
    ("legacy IPC memory (`ImportedIpcMemory`), IPC events",
     feature(lambda d: "yes" if d.has("cuIpcOpenMemHandle", 11000) else "yes (CUDA 4.1 open ABI)")),
    ("checkpoint and restore of a process (`ProcessCheckpoint`), onto other GPUs (`RestorePlacement`)",
     feature(lambda d: NOT_IN_REPORT if d.predates([("cuCheckpointProcessLock", 12080)])
             else ("NotSupported" if not d.has("cuCheckpointProcessLock", 12080)
                   else "yes" if d.report["driver_version"] >= 13000 else "in place only"))),
    ("`PitchedBuffer`, `copy_2d` / `copy_3d`, 16-bit and 2D sets",
     feature(lambda d: NOT_IN_REPORT if d.predates([("cuMemAllocPitch", 3020), ("cuMemcpy3DAsync", 3020)])
             else yes_if(d.has("cuMemAllocPitch", 3020) and d.has("cuMemcpy3DAsync", 3020)
                         and d.has("cuMemsetD2D16", 3020)))),
    ("3D copies in a `CopyPlan`", feature(copy_3d_plan_cell)),
    ("discards in a `PrefetchPlan`", feature(discard_cell)),
]


def render(columns):
    header = ["feature"] + [title for title, _ in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for title, cell in ROWS:
        lines.append("| " + " | ".join([title] + [cell(driver) for _, driver in columns]) + " |")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 4 and not (len(argv) == 3 and argv[2] == "--print"):
        sys.exit(__doc__)
    build_dir, real_json = os.path.abspath(argv[0]), argv[1]  # cudyn refuses relative driver paths
    with open(real_json) as f:
        real = json.load(f)
    device = real["devices"][0]["name"] if real.get("devices") else "no device"
    real_title = "%s, driver %d.%d" % (device, real["driver_version"] // 1000, real["driver_version"] % 1000 // 10)
    columns = [(real_title, Driver(real))]
    columns += [(title, Driver(cudyn_info(build_dir, variant))) for title, variant in FAKE_COLUMNS]
    table = render(columns)
    if argv[2] == "--print":
        print(table)
        return 0
    readme_path = argv[3]
    with open(readme_path) as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        sys.exit("%s has no support-matrix markers" % readme_path)
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    wanted = head + BEGIN + "\n" + table + "\n" + END + tail
    if argv[2] == "--write":
        with open(readme_path, "w") as f:
            f.write(wanted)
        return 0
    if argv[2] == "--check":
        if wanted != readme:
            print(f"{readme_path}'s support matrix differs from what the drivers report now; expected:\n" + table)
            return 1
        print("support matrix in %s matches %d measured drivers" % (readme_path, len(columns)))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
