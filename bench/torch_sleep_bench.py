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
Ratios (cudyn / raw) are of medians. Run three fresh processes for a record:
    for i in 1 2 3; do python3 bench/torch_sleep_bench.py; done
Environment: the built package (<builddir>/python, libcudyn-torch.so beside
its modules) on PYTHONPATH; BENCH_ROUNDS (default 200 for alloc-free, 5 for sleep-wake),
BENCH_SLEEP_GIB (default "1,16").
"""

import ctypes
import json
import os
import statistics
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

MIB = 1 << 20
GIB = 1 << 30


def summary(samples):
    ordered = sorted(samples)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 4 else [ordered[0], statistics.median(ordered), ordered[-1]]
    return {"median": statistics.median(ordered), "q1": q[0], "q3": q[2], "n": len(ordered), "unit": "us"}


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
        torch.cuda.synchronize()

        def cudyn_sleep_wake():
            native.sleep(("weights",))
            native.wake_up()

        record(f"sleep-wake/{label}/cudyn", timed(cudyn_sleep_wake, sleep_rounds, warmup=1))
        native.free(address, size, device)

        raw_address = raw.reserve(size)
        state = {"handle": raw.create_map(raw_address, size)}

        def raw_sleep_wake():
            state["handle"] = raw.sleep_wake(raw_address, size, state["handle"])

        record(f"sleep-wake/{label}/raw", timed(raw_sleep_wake, sleep_rounds, warmup=1))
        raw.unmap_release(raw_address, size, state["handle"])
        raw.address_free(raw_address, size)
        record(f"sleep-wake/{label}/ratio cudyn/raw",
               results["cases"][f"sleep-wake/{label}/cudyn"]["median"] /
               results["cases"][f"sleep-wake/{label}/raw"]["median"])

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


if __name__ == "__main__":
    main()
