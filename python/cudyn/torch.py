"""PyTorch memory that sleeps and wakes at the same addresses.

    import cudyn.torch as ct
    with ct.use_tag("weights"):
        model = build_model().cuda()          # weights in the "weights" pool
    with ct.use_tag("kv_cache"):
        kv = torch.empty(n, device="cuda")    # the KV cache in its own pool
    ct.sleep(offload_tags=("weights",))       # device memory back to the driver
    ...                                       # another job uses the GPU
    ct.wake_up()                              # same addresses; weights restored

Each (tag, device) has its own ``torch.cuda.MemPool`` backed by
``torch.cuda.memory.CUDAPluggableAllocator`` over libcudyn-torch's
``cudyn_torch_alloc`` / ``cudyn_torch_free``: every segment PyTorch's caching
allocator takes for the pool is one VMM allocation under that tag.
``use_tag`` allocates under the pool (``torch.cuda.use_mem_pool``).

``sleep`` copies the offloaded tags' bytes to pinned host memory, waits for
the device's queued work first, and releases the physical memory of every
awake allocation; the virtual addresses stay reserved, so tensors, CUDA
graphs and raw pointers stay valid (do not touch the memory until
``wake_up``). ``wake_up`` maps fresh memory at the same addresses; memory of
tags that were not offloaded is undefined (not zeroed). Buffers an NCCL
communicator registered (ncclCommRegister, user buffers) lose their
registration when sleep unmaps them: register them again after ``wake_up``,
or allocate them outside this allocator so that they stay awake (sleep
releases every awake allocation it holds).

PyTorch is imported when a function here first needs it, never at import.
"""

import contextlib
import threading

from . import sleep_alloc as _native
from .sleep_alloc import (  # noqa: F401  (re-exported: the whole API lives here)
    SleepAllocError,
    cached_bytes,
    get_tag,
    library_path,
    set_cache_limit,
    set_peers,
    stats,
    trim_cache,
)

__all__ = [
    "SleepAllocError",
    "pluggable_allocator",
    "mem_pool",
    "use_tag",
    "sleep",
    "wake_up",
    "stats",
    "pool_bytes",
    "set_cache_limit",
    "set_peers",
    "trim_cache",
    "cached_bytes",
    "get_tag",
    "library_path",
]

_lock = threading.RLock()
_allocator = None
_pools = {}  # (tag, device) -> torch.cuda.MemPool


def _torch():
    import torch  # noqa: PLC0415  (lazy by design: no torch at `import cudyn`)

    return torch


def pluggable_allocator():
    """The process's ``CUDAPluggableAllocator`` over libcudyn-torch (made
    once: PyTorch loads the library from the same path ctypes did, so both
    reach the one allocator)."""
    global _allocator
    with _lock:
        if _allocator is None:
            torch = _torch()
            _native.library()  # loaded first: a missing library is named clearly
            _allocator = torch.cuda.memory.CUDAPluggableAllocator(
                _native.library_path(), "cudyn_torch_alloc", "cudyn_torch_free"
            )
        return _allocator


def _device_index(device):
    torch = _torch()
    if device is None:
        return torch.cuda.current_device()
    return torch.device("cuda", device).index if isinstance(device, int) else torch.device(device).index


def mem_pool(tag="default", device=None):
    """The ``torch.cuda.MemPool`` of ``tag`` on ``device`` (made at first use)."""
    torch = _torch()
    index = _device_index(device)
    key = (tag, index)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            with torch.cuda.device(index):
                pool = torch.cuda.MemPool(pluggable_allocator().allocator())
            _pools[key] = pool
        return pool


@contextlib.contextmanager
def use_tag(tag, device=None):
    """Allocates the tensors made inside under ``tag``'s pool on ``device``
    (the current device when None); yields the pool. The tag is process-wide
    while inside: allocate from one thread at a time."""
    torch = _torch()
    pool = mem_pool(tag, device)
    index = _device_index(device)
    with _lock:
        previous = _native.get_tag()
        _native.set_tag(tag)
    try:
        with torch.cuda.use_mem_pool(pool, device=index):
            yield pool
    finally:
        with _lock:
            _native.set_tag(previous)


def sleep(offload_tags=()):
    """Offloads ``offload_tags`` to pinned host memory and releases the device
    memory of every tag; returns what was done (a dict). See the module text."""
    return _native.sleep(offload_tags)


def wake_up(tags=None):
    """Maps memory at the same addresses again for ``tags`` (None: all), with
    offloaded bytes restored; returns what was done (a dict)."""
    return _native.wake_up(tags)


def pool_bytes(tags=None):
    """Bytes the allocator holds (awake or asleep) for ``tags`` (None: all)."""
    wanted = None if tags is None else {tags} if isinstance(tags, str) else set(tags)
    return sum(row["live_bytes"] for row in _native.stats() if wanted is None or row["tag"] in wanted)
