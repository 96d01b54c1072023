"""cudyn.torch on a GPU: a model from random weights under the "weights" tag
and a KV-cache-like buffer under "kv_cache"; sleep(offload_tags=("weights",))
gives at least 95% of the pool's bytes back to the device (cuMemGetInfo),
another allocation uses that memory meanwhile, wake_up brings the weights back
at the same addresses: the forward pass is bit-identical and a CUDA graph
captured before the sleep replays to the same output. Then a hundred cycles
with no growth of the device's used memory or the process's RSS.

Run with plain python3 or pytest, with the built package (<builddir>/python,
libcudyn-torch.so beside its modules) on PYTHONPATH; CUDYN_SLEEP_CYCLES changes the cycle count (default 100).
Exit 77 (pytest: skipped) without PyTorch or a GPU.
"""

import os
import sys
import time

# cuBLAS picks the same kernels run after run with a fixed workspace: the
# outputs compared bit for bit depend on it.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

MIB = 1 << 20
HIDDEN = 4096
LAYERS = 32  # 32 x (4096 x 4096 fp16 + bias): 1 GiB of weights
KV_BYTES = 2 << 30
BATCH = 64


def _rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _used_device_bytes(torch):
    free, total = torch.cuda.mem_get_info()
    return total - free


def _say(text):
    print(text, flush=True)


def _check(condition, text):
    if not condition:
        raise AssertionError(text)
    _say("PASS " + text)


def run(cycles):
    import torch

    import cudyn.torch as ct

    torch.manual_seed(1234)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)

    with ct.use_tag("weights"):
        layers = []
        for _ in range(LAYERS):
            layers += [torch.nn.Linear(HIDDEN, HIDDEN, device=device, dtype=torch.float16), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers).eval()
    with ct.use_tag("kv_cache"):
        kv_cache = torch.empty(KV_BYTES, dtype=torch.uint8, device=device)
    kv_cache.fill_(7)
    x = torch.randn(BATCH, HIDDEN, device=device, dtype=torch.float16)
    addresses = [p.data_ptr() for p in model.parameters()] + [kv_cache.data_ptr()]
    rows = {row["tag"]: row for row in ct.stats()}
    _check(rows["weights"]["live_bytes"] >= LAYERS * HIDDEN * HIDDEN * 2, f"weights in the pool: {rows['weights']}")
    _check(rows["kv_cache"]["live_bytes"] >= KV_BYTES, f"kv cache in the pool: {rows['kv_cache']}")

    with torch.inference_mode():
        expected = model(x).clone()
        # A CUDA graph captured before any sleep (warmed up on a side stream).
        static_x = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(static_x)
        graph.replay()
        torch.cuda.synchronize()
        _check(torch.equal(static_y, expected), "the graph replays the eager output before sleeping")

    pool = ct.pool_bytes()
    torch.cuda.synchronize()
    # Leave only half the pool's size free: what is allocated during the sleep
    # fits only in memory the sleep gave back.
    free_now, _ = torch.cuda.mem_get_info()
    filler = torch.empty(max(free_now - pool // 2 - 256 * MIB, 0), dtype=torch.uint8, device=device)
    free_before, _ = torch.cuda.mem_get_info()

    started = time.perf_counter()
    report = ct.sleep(offload_tags=("weights",))
    slept = time.perf_counter() - started
    free_after, _ = torch.cuda.mem_get_info()
    released = free_after - free_before
    _say(f"sleep: {report} in {slept * 1e3:.1f} ms; pool {pool} bytes, device free rose by {released} bytes")
    _check(released >= 0.95 * pool, f"sleep returned {released / pool:.4f} of the pool's {pool} bytes (>= 0.95)")

    other = torch.empty(int(pool * 0.9), dtype=torch.uint8, device=device)
    other.fill_(1)
    torch.cuda.synchronize()
    _check(int(other[-1].item()) == 1, f"another allocation of {other.numel()} bytes used the released memory")
    del other, filler
    torch.cuda.empty_cache()

    # Weights first (a server loads weights before it needs its KV cache).
    started = time.perf_counter()
    report = ct.wake_up(tags=("weights",))
    woke = time.perf_counter() - started
    _say(f"wake_up(weights): {report} in {woke * 1e3:.1f} ms")
    with torch.inference_mode():
        _check(torch.equal(model(x), expected), "the forward pass is bit-identical after waking the weights")
    try:
        ct.wake_up(tags=("weights",))
        _check(False, "waking awake weights is refused")
    except ct.SleepAllocError as refused:
        _check("already awake" in str(refused), f"waking awake weights is refused: {refused}")
    ct.wake_up()
    _check([p.data_ptr() for p in model.parameters()] + [kv_cache.data_ptr()] == addresses,
           "every tensor kept its address")
    kv_cache.fill_(3)  # undefined after the wake; writable
    torch.cuda.synchronize()
    _check(int(kv_cache[KV_BYTES // 2].item()) == 3, "the kv cache is writable after waking")
    with torch.inference_mode():
        static_y.zero_()
        graph.replay()
        torch.cuda.synchronize()
        _check(torch.equal(static_y, expected), "the CUDA graph captured before the sleep replays correctly")

    used_first = rss_first = None
    for cycle in range(1, cycles + 1):
        ct.sleep(offload_tags=("weights",))
        ct.wake_up()
        torch.cuda.synchronize()
        if cycle % 10 == 0 or cycle == cycles:
            with torch.inference_mode():
                graph.replay()
                same = torch.equal(model(x), expected) and torch.equal(static_y, expected)
            if not same:
                raise AssertionError(f"cycle {cycle}: output differs after wake_up")
        used, rss = _used_device_bytes(torch), _rss_bytes()
        if cycle == min(5, cycles):  # after the first cycles' one-time growth (pinned pools, libraries)
            used_first, rss_first = used, rss
        if cycle % 10 == 0:
            _say(f"cycle {cycle}: device used {used} bytes, rss {rss} bytes")
    _check(used - used_first <= 16 * MIB,
           f"{cycles} cycles: device used memory grew by {(used - used_first) / MIB:.1f} MiB (<= 16 MiB)")
    _check(rss - rss_first <= 64 * MIB,
           f"{cycles} cycles: RSS grew by {(rss - rss_first) / MIB:.1f} MiB (<= 64 MiB)")
    _say(f"stats: {ct.stats()}")


def _usable():
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return None


def test_torch_sleep_wake():
    reason = _usable()
    if reason is not None:
        import pytest

        pytest.skip(reason)
    run(int(os.environ.get("CUDYN_SLEEP_CYCLES", "100")))


if __name__ == "__main__":
    reason = _usable()
    if reason is not None:
        _say(f"SKIP: {reason}")
        sys.exit(77)
    run(int(os.environ.get("CUDYN_SLEEP_CYCLES", "100")))
    _say("ALL PASSED")
