"""cudyn.torch against PyTorch and the raw driver, in one process.

Cases (median and quartiles of N rounds, microseconds or milliseconds):
  alloc-free 2 MiB / 64 MiB:
    torch-caching      torch.empty + del on PyTorch's default caching allocator
    cudyn-pool         the same inside cudyn.torch.use_tag (PyTorch's caching
                       allocator over cudyn's pool: a cache hit after the first)
    cudyn-c            cudyn_torch_alloc + cudyn_torch_free: a VMM allocation per request
    cudyn-c-cached     the same with a cache limit: a hit after the first
    raw-vmm            cuMemAddressReserve + cuMemCreate + cuMemMap + cuMemSetAccess,
                       then cuMemUnmap + cuMemRelease + cuMemAddressFree (libcuda by ctypes)
  sleep-wake 1 GiB / 16 GiB of weights (one allocation, offloaded):
    cudyn              sleep(offload_tags=("weights",)) then wake_up()
    raw                cuCtxSynchronize, cuMemHostAlloc, cuMemcpyDtoH, cuMemUnmap,
                       cuMemRelease; then cuMemCreate, cuMemMap, cuMemSetAccess,
                       cuMemcpyHtoD, cuMemFreeHost
    checkpoint         the driver's process checkpoint of a child process that
                       holds as many bytes (torch.empty on cuda, filled with a
                       pattern): cudyn.ProcessCheckpoint lock, checkpoint,
                       restore, unlock (cuCheckpointProcessLock / Checkpoint /
                       Restore / Unlock); the child checks every byte after the
                       last round. Also timed alone: checkpoint-step (device
                       memory to host) and restore-step (back). The child holds
                       its CUDA context and PyTorch's besides the bytes, which the
                       driver saves too; the parent's sleep-wake buffers are
                       freed before the child starts.
The sleep-wake sides take turns, round by round, the side going first
alternating; "ratio cudyn/raw" there is the median of the rounds' ratios
(with the lowest and highest). The other ratios (cudyn-c / raw-vmm,
cudyn / checkpoint) are of medians. Run three fresh
processes for a record:
    for i in 1 2 3; do python3 bench/torch_sleep_bench.py; done
Environment: the built package (<builddir>/python, libcudyn-torch.so beside
its modules) on PYTHONPATH; BENCH_ROUNDS (default 200 for alloc-free),
BENCH_SLEEP_ROUNDS (default 5 for sleep-wake), BENCH_SLEEP_GIB (default "1,16"),
BENCH_CHECKPOINT (default 1; 0 leaves the checkpoint side out),
BENCH_CHECKPOINT_ROUNDS (default 3, after one warm-up round).
Where the driver or device cannot checkpoint a process (NotSupported), the
checkpoint cases print {"skipped": reason} and the bench goes on; any other
failure of that side (a refused step, a timeout, bytes changed in the child)
prints {"error": reason}, the bench goes on, and it exits with status 1.
"""

import ctypes
import json
import os
import select
import statistics
import subprocess
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

MIB = 1 << 20
GIB = 1 << 30


def summary(samples):
    ordered = sorted(samples)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 4 else [ordered[0], statistics.median(ordered), ordered[-1]]
    return {"median": statistics.median(ordered), "q1": q[0], "q3": q[2], "n": len(ordered), "unit": "us"}


def paired(first, second, rounds, warmup=1):
    """Rounds of one call of each, the side going first alternating by round
    (a drift during the run favours neither): each side's summary and the
    rounds' ratios first/second (median, lowest, highest). A ratio of two
    medians could come from different rounds; the paired one cannot."""
    for _ in range(warmup):
        first()
        second()
    samples = ([], [])
    for index in range(rounds):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for side in order:
            started = time.perf_counter_ns()
            (first, second)[side]()
            samples[side].append((time.perf_counter_ns() - started) / 1e3)  # microseconds
    ratios = [a / b for a, b in zip(*samples)]
    ratio = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "rounds": ratios}
    return summary(samples[0]), summary(samples[1]), ratio


def timed(function, rounds, warmup=3):
    for _ in range(warmup):
        function()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        function()
        samples.append((time.perf_counter_ns() - started) / 1e3)  # microseconds
    return summary(samples)


class RawDriver:
    """The few VMM and copy entries the raw cases call, from libcuda by ctypes."""

    class Location(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    class AllocFlags(ctypes.Structure):
        _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                    ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]

    class Prop(ctypes.Structure):
        pass

    class AccessDesc(ctypes.Structure):
        pass

    def __init__(self, device):
        RawDriver.Prop._fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                                   ("location", RawDriver.Location), ("win32HandleMetaData", ctypes.c_void_p),
                                   ("allocFlags", RawDriver.AllocFlags)]
        RawDriver.AccessDesc._fields_ = [("location", RawDriver.Location), ("flags", ctypes.c_int)]
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.prop = RawDriver.Prop()
        self.prop.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
        self.prop.location = RawDriver.Location(1, device)  # CU_MEM_LOCATION_TYPE_DEVICE
        self.access = RawDriver.AccessDesc(RawDriver.Location(1, device), 3)  # PROT_READWRITE
        granularity = ctypes.c_size_t()
        self.check(self.cu.cuMemGetAllocationGranularity(ctypes.byref(granularity), ctypes.byref(self.prop), 0),
                   "cuMemGetAllocationGranularity")
        self.granularity = granularity.value

    @staticmethod
    def check(result, name):
        if result != 0:
            raise RuntimeError(f"{name}: CUresult {result}")

    def create_map(self, address, size):
        handle = ctypes.c_ulonglong()
        self.check(self.cu.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(self.prop),
                                       ctypes.c_ulonglong(0)), "cuMemCreate")
        self.check(self.cu.cuMemMap(ctypes.c_ulonglong(address), ctypes.c_size_t(size), ctypes.c_size_t(0), handle,
                                    ctypes.c_ulonglong(0)), "cuMemMap")
        self.check(self.cu.cuMemSetAccess(ctypes.c_ulonglong(address), ctypes.c_size_t(size),
                                          ctypes.byref(self.access), ctypes.c_size_t(1)), "cuMemSetAccess")
        return handle

    def unmap_release(self, address, size, handle):
        self.check(self.cu.cuMemUnmap(ctypes.c_ulonglong(address), ctypes.c_size_t(size)), "cuMemUnmap")
        self.check(self.cu.cuMemRelease(handle), "cuMemRelease")

    def reserve(self, size):
        address = ctypes.c_ulonglong()
        self.check(self.cu.cuMemAddressReserve(ctypes.byref(address), ctypes.c_size_t(size),
                                               ctypes.c_size_t(self.granularity), ctypes.c_ulonglong(0),
                                               ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        return address.value

    def address_free(self, address, size):
        self.check(self.cu.cuMemAddressFree(ctypes.c_ulonglong(address), ctypes.c_size_t(size)), "cuMemAddressFree")

    def alloc_free(self, size):
        address = self.reserve(size)
        handle = self.create_map(address, size)
        self.unmap_release(address, size, handle)
        self.address_free(address, size)

    def sleep_wake(self, address, size, handle):
        """One raw sleep and wake of a mapped allocation; returns the new handle."""
        self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")
        host = ctypes.c_void_p()
        self.check(self.cu.cuMemHostAlloc(ctypes.byref(host), ctypes.c_size_t(size), 0), "cuMemHostAlloc")
        self.check(self.cu.cuMemcpyDtoH_v2(host, ctypes.c_ulonglong(address), ctypes.c_size_t(size)), "cuMemcpyDtoH_v2")
        self.unmap_release(address, size, handle)
        handle = self.create_map(address, size)
        self.check(self.cu.cuMemcpyHtoD_v2(ctypes.c_ulonglong(address), host, ctypes.c_size_t(size)), "cuMemcpyHtoD_v2")
        self.check(self.cu.cuMemFreeHost(host), "cuMemFreeHost")
        return handle


# The checkpoint side's child: allocates the bytes, fills them with a pattern,
# says "ready" on its report pipe and waits on stdin; "verify" makes it check
# every byte, answer "ok" (or "bad ...") and exit. Started as
#   python3 torch_sleep_bench.py --checkpoint-child NBYTES REPORT_FD
CHILD_FLAG = "--checkpoint-child"
CHILD_START_TIMEOUT_S = 600.0   # importing torch, the context, filling 16 GiB
CHILD_VERIFY_TIMEOUT_S = 600.0
CHILD_EXIT_TIMEOUT_S = 60.0
LOCK_TIMEOUT_S = 60.0
PATTERN_CHUNK_WORDS = 32 << 20  # 256 MiB of int64 words per fill or check


def pattern(start, end, torch):
    """Words start..end of the child's pattern: distinct for every word, no overflow below 2**33 words."""
    words = torch.arange(start, end, dtype=torch.int64, device="cuda")
    return torch.bitwise_xor(words * 2654435761, 0x5DEECE66D)


def checkpoint_child(nbytes, report_fd):
    import torch

    torch.cuda.set_device(0)
    report = os.fdopen(report_fd, "w", buffering=1)
    memory = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    words = memory.view(torch.int64)
    for start in range(0, words.numel(), PATTERN_CHUNK_WORDS):
        end = min(start + PATTERN_CHUNK_WORDS, words.numel())
        words[start:end] = pattern(start, end, torch)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the fill's temporaries go back: the child holds the bytes and its contexts
    address = memory.data_ptr()
    report.write(f"ready {os.getpid()} {nbytes}\n")
    for line in sys.stdin:
        if line.strip() != "verify":
            continue
        bad = None
        if memory.data_ptr() != address:
            bad = f"address moved from {address:#x} to {memory.data_ptr():#x}"
        for start in range(0, words.numel(), PATTERN_CHUNK_WORDS):
            if bad:
                break
            end = min(start + PATTERN_CHUNK_WORDS, words.numel())
            if not torch.equal(words[start:end], pattern(start, end, torch)):
                bad = f"words {start}..{end} changed"
        torch.cuda.synchronize()
        report.write(f"bad {bad}\n" if bad else "ok\n")
        report.close()
        return 1 if bad else 0
    return 2  # stdin closed without "verify": the parent went away


class CheckpointChild:
    """A child process holding `nbytes` of device memory; always reaped by close()."""

    def __init__(self, nbytes):
        self.process = None
        read_fd, write_fd = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), CHILD_FLAG, str(nbytes), str(write_fd)],
                stdin=subprocess.PIPE, stdout=sys.stderr, pass_fds=(write_fd,), text=True)  # stdout: the JSON lines only
        finally:
            os.close(write_fd)
            if self.process is None:
                os.close(read_fd)
        self.report = os.fdopen(read_fd, "r")
        line = self.read_line(CHILD_START_TIMEOUT_S, "start")
        if line.split()[:1] != ["ready"]:
            raise RuntimeError(f"checkpoint child: expected 'ready', read {line!r}")
        self.pid = self.process.pid

    def read_line(self, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"checkpoint child: no answer to {what} within {timeout:.0f} s")
            ready, _, _ = select.select([self.report], [], [], min(left, 1.0))
            if ready:
                line = self.report.readline()
                if not line:
                    raise RuntimeError(f"checkpoint child exited during {what} "
                                       f"(status {self.process.poll()})")
                return line.strip()
            if self.process.poll() is not None:
                raise RuntimeError(f"checkpoint child exited during {what} (status {self.process.returncode})")

    def verify(self):
        """Has the child check its bytes; returns None when every byte is as filled, else why not."""
        self.process.stdin.write("verify\n")
        self.process.stdin.flush()
        line = self.read_line(CHILD_VERIFY_TIMEOUT_S, "verify")
        return None if line == "ok" else line

    def close(self):
        if self.process is None:
            return
        try:
            if self.process.stdin and not self.process.stdin.closed:
                self.process.stdin.close()  # EOF: a child still waiting exits
        except OSError:
            pass
        try:
            self.process.wait(timeout=CHILD_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self.report.close()
            self.process = None


def checkpoint_side(nbytes, rounds, warmup=1):
    """Times the driver's checkpoint and restore of a child holding `nbytes`.

    Returns (cases, None) with the summaries of "checkpoint" (lock, checkpoint,
    restore, unlock), "checkpoint-step" and "restore-step"; or (None,
    ("skipped" or "error", reason)).
    """
    import cudyn

    child = None
    try:
        child = CheckpointChild(nbytes)
        whole, to_host, back = [], [], []
        for round_index in range(warmup + rounds):
            started = time.perf_counter_ns()
            target = cudyn.ProcessCheckpoint.lock(child.pid, timeout=LOCK_TIMEOUT_S)
            try:
                checkpoint_started = time.perf_counter_ns()
                target.checkpoint()
                restore_started = time.perf_counter_ns()
                target.restore()
                restore_done = time.perf_counter_ns()
                target.unlock()
                done = time.perf_counter_ns()
            finally:
                target.finish()  # restores and unlocks what a failed step left; nothing once running
            if round_index >= warmup:
                whole.append((done - started) / 1e3)
                to_host.append((restore_started - checkpoint_started) / 1e3)
                back.append((restore_done - restore_started) / 1e3)
        bad = child.verify()
        if bad:
            return None, ("error", f"the child's bytes after {warmup + rounds} checkpoints: {bad}")
        return {"checkpoint": summary(whole), "checkpoint-step": summary(to_host),
                "restore-step": summary(back)}, None
    except cudyn.NotSupported as error:
        return None, ("skipped", f"no process checkpoint here: {error}")
    except Exception as error:  # a refused step, a timeout, a child that died: reported, not fatal
        return None, ("error", f"{type(error).__name__}: {error}")
    finally:
        if child is not None:
            child.close()


def main():
    import torch

    import cudyn.torch as ct
    from cudyn import sleep_alloc as native

    device = 0
    torch.cuda.set_device(device)
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    raw = RawDriver(device)
    rounds = int(os.environ.get("BENCH_ROUNDS", "200"))
    sleep_rounds = int(os.environ.get("BENCH_SLEEP_ROUNDS", "5"))
    checkpoint_enabled = os.environ.get("BENCH_CHECKPOINT", "1") != "0"
    checkpoint_rounds = int(os.environ.get("BENCH_CHECKPOINT_ROUNDS", "3"))
    failures = []
    results = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "cases": {}}

    def record(name, value):
        results["cases"][name] = value
        print(json.dumps({name: value}), flush=True)

    # Sleep and wake first, while the weights are the allocator's only
    # allocation (the pool case below keeps its segments).
    for gib in [int(g) for g in os.environ.get("BENCH_SLEEP_GIB", "1,16").split(",")]:
        size = gib * GIB
        label = f"{gib}GiB"
        native.set_tag("weights")
        address = native.alloc(size, device)
        native.set_tag("default")
        raw_address = raw.reserve(size)
        state = {"handle": raw.create_map(raw_address, size)}
        torch.cuda.synchronize()

        def cudyn_sleep_wake():
            native.sleep(("weights",))
            native.wake_up()

        def raw_sleep_wake():
            state["handle"] = raw.sleep_wake(raw_address, size, state["handle"])

        # Both sides hold their bytes for the whole comparison and take
        # turns, so that the host's and the driver's moods (pinning this many
        # pages takes seconds and varies) fall on both alike.
        cudyn_side, raw_side, ratio = paired(cudyn_sleep_wake, raw_sleep_wake, sleep_rounds)
        record(f"sleep-wake/{label}/cudyn", cudyn_side)
        record(f"sleep-wake/{label}/raw", raw_side)
        record(f"sleep-wake/{label}/ratio cudyn/raw", ratio)
        native.free(address, size, device)
        raw.unmap_release(raw_address, size, state["handle"])
        raw.address_free(raw_address, size)

        if checkpoint_enabled:
            # The parent's buffers of this size are freed above; the child
            # holds the only copy of the bytes while it runs.
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            cases, why_not = checkpoint_side(size, checkpoint_rounds)
            if cases:
                for name, value in cases.items():
                    record(f"sleep-wake/{label}/{name}", value)
                record(f"sleep-wake/{label}/ratio cudyn/checkpoint",
                       results["cases"][f"sleep-wake/{label}/cudyn"]["median"] /
                       results["cases"][f"sleep-wake/{label}/checkpoint"]["median"])
            else:
                kind, reason = why_not
                record(f"sleep-wake/{label}/checkpoint", {kind: reason})
                print(f"checkpoint side of {label} {kind}: {reason}", file=sys.stderr, flush=True)
                if kind == "error":
                    failures.append(f"sleep-wake/{label}/checkpoint: {reason}")

    for size in (2 * MIB, 64 * MIB):
        label = f"{size // MIB}MiB"

        def torch_caching():
            t = torch.empty(size, dtype=torch.uint8, device="cuda")
            del t

        record(f"alloc-free/{label}/torch-caching", timed(torch_caching, rounds))
        with ct.use_tag("bench"):
            record(f"alloc-free/{label}/cudyn-pool", timed(torch_caching, rounds))

        def cudyn_c():
            native.free(native.alloc(size, device), size, device)

        record(f"alloc-free/{label}/cudyn-c", timed(cudyn_c, rounds))
        native.set_cache_limit(size)
        record(f"alloc-free/{label}/cudyn-c-cached", timed(cudyn_c, rounds))
        native.set_cache_limit(0)
        record(f"alloc-free/{label}/raw-vmm", timed(lambda: raw.alloc_free(size), rounds))
        record(f"alloc-free/{label}/ratio cudyn-c/raw-vmm",
               results["cases"][f"alloc-free/{label}/cudyn-c"]["median"] /
               results["cases"][f"alloc-free/{label}/raw-vmm"]["median"])

    output = os.environ.get("BENCH_JSON")
    if output:
        with open(output, "w") as out:
            json.dump(results, out, indent=1)
    if failures:
        print("failed: " + "; ".join(failures), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == CHILD_FLAG:
        sys.exit(checkpoint_child(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit(main())
