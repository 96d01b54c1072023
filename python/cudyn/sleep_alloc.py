"""The sleeping allocator's C entry points (libcudyn-torch) through ctypes.

No PyTorch here: this layer loads the library and turns its return codes into
exceptions, so it runs (and is tested) wherever the library and a driver are,
the fake driver included. ``cudyn.torch`` puts a ``torch.cuda.MemPool`` on top.

The library is found, in order, at ``$CUDYN_TORCH_LIBRARY`` (a path), next to
this module (``libcudyn-torch.so``), or by the dynamic loader's search
(``libcudyn-torch.so``). PyTorch's ``CUDAPluggableAllocator`` must be given the
same path (``library_path()``), so that both share one allocator.
"""

import ctypes
import os
import threading

__all__ = [
    "SleepAllocError",
    "library_path",
    "library",
    "set_tag",
    "get_tag",
    "set_peers",
    "set_cache_limit",
    "trim_cache",
    "cached_bytes",
    "sleep",
    "wake_up",
    "stats",
    "reset",
]

LIBRARY_NAME = "libcudyn-torch.so"
ENVIRONMENT_VARIABLE = "CUDYN_TORCH_LIBRARY"

# cudyn::ErrorCode + 1, as the C entry points answer.
ERROR_CODES = {
    1: "not_supported",
    2: "driver_not_found",
    3: "stub_driver",
    4: "driver_init_failed",
    5: "driver_refused",
    6: "invalid_argument",
    7: "out_of_memory",
    8: "driver",
    9: "io",
    10: "timeout",
    11: "permission_denied",
}


class SleepAllocError(RuntimeError):
    """A refusal or failure of the allocator; ``code`` is cudyn's error code
    name ("invalid_argument", "out_of_memory", ...), the message says what
    happened and, for a failure half-way, what state each allocation is in."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Report(ctypes.Structure):
    _fields_ = [
        ("allocations", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("offloaded_bytes", ctypes.c_uint64),
        ("cache_released", ctypes.c_uint64),
    ]

    def as_dict(self):
        return {name: int(getattr(self, name)) for name, _ in self._fields_}


class _TagStats(ctypes.Structure):
    _fields_ = [
        ("tag", ctypes.c_char * 64),
        ("device", ctypes.c_int32),
        ("live_bytes", ctypes.c_uint64),
        ("live_count", ctypes.c_uint64),
        ("peak_bytes", ctypes.c_uint64),
        ("awake_bytes", ctypes.c_uint64),
        ("sleeping_bytes", ctypes.c_uint64),
        ("sleeping_count", ctypes.c_uint64),
        ("offloaded_bytes", ctypes.c_uint64),
    ]


_lock = threading.Lock()
_library = None
_library_path = None


def library_path():
    """The path the library is (or will be) loaded from."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    if configured:
        if not os.path.isfile(configured):
            raise SleepAllocError(
                "invalid_argument",
                f"{ENVIRONMENT_VARIABLE}={configured}: no such file (build it: meson compile -C BUILD cudyn-torch)",
            )
        return os.path.abspath(configured)
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    if os.path.isfile(beside):
        return beside
    return LIBRARY_NAME


def library():
    """The loaded library (ctypes.CDLL), with its signatures declared."""
    global _library, _library_path
    with _lock:
        if _library is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as error:
                raise SleepAllocError(
                    "driver_not_found",
                    f"loading {path}: {error} (set {ENVIRONMENT_VARIABLE} to the built libcudyn-torch.so)",
                ) from error
            _declare(lib)
            _library, _library_path = lib, path
        return _library


def _declare(lib):
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    signatures = {
        "cudyn_torch_alloc": (ctypes.c_void_p, [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]),
        "cudyn_torch_free": (None, [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]),
        "cudyn_torch_set_tag": (ctypes.c_int, [ctypes.c_char_p]),
        "cudyn_torch_get_tag": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
        "cudyn_torch_set_peers": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
        "cudyn_torch_set_cache_limit": (ctypes.c_int, [ctypes.c_uint64]),
        "cudyn_torch_trim_cache": (ctypes.c_int, []),
        "cudyn_torch_sleep": (ctypes.c_int, [c_char_pp, ctypes.c_int, ctypes.POINTER(_Report)]),
        "cudyn_torch_wake_up": (ctypes.c_int, [c_char_pp, ctypes.c_int, ctypes.POINTER(_Report)]),
        "cudyn_torch_stats": (ctypes.c_int, [ctypes.POINTER(_TagStats), ctypes.c_int]),
        "cudyn_torch_cached_bytes": (ctypes.c_uint64, []),
        "cudyn_torch_last_error": (ctypes.c_char_p, []),
        "cudyn_torch_last_error_code": (ctypes.c_int, []),
        "cudyn_torch_reset": (ctypes.c_int, []),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def _check(answer):
    if answer != 0:
        message = library().cudyn_torch_last_error().decode("utf-8", "replace")
        raise SleepAllocError(ERROR_CODES.get(answer, f"code {answer}"), message)


def _check_last():
    _check(library().cudyn_torch_last_error_code())


def _tag_array(tags):
    names = [_encoded(tag) for tag in tags]
    return (ctypes.c_char_p * max(len(names), 1))(*names), len(names)


def _encoded(tag):
    if not isinstance(tag, str):
        raise TypeError(f"a tag is a str, not {type(tag).__name__}")
    return tag.encode("utf-8")


def alloc(size, device=0):
    """A raw allocation (an int address), tagged with the current tag: what
    PyTorch's pool asks for; for tests and programs without PyTorch."""
    address = library().cudyn_torch_alloc(size, device, None)
    if not address:
        _check_last()
    return address


def free(address, size=0, device=0):
    """Gives a raw allocation back (SleepAllocError when the allocator refused)."""
    library().cudyn_torch_free(address, size, device, None)
    _check_last()


def set_tag(tag):
    """The tag later allocations get (process-wide)."""
    _check(library().cudyn_torch_set_tag(_encoded(tag)))


def get_tag():
    buffer = ctypes.create_string_buffer(64)
    _check(library().cudyn_torch_get_tag(buffer, len(buffer)))
    return buffer.value.decode("utf-8")


def set_peers(device, peers):
    """Devices given read-write access to later allocations on ``device``."""
    peers = list(peers)
    array = (ctypes.c_int * max(len(peers), 1))(*peers)
    _check(library().cudyn_torch_set_peers(device, array, len(peers)))


def set_cache_limit(nbytes):
    """Bytes of freed allocations kept for reuse (0, the default: none)."""
    _check(library().cudyn_torch_set_cache_limit(nbytes))


def trim_cache():
    _check(library().cudyn_torch_trim_cache())


def cached_bytes():
    return int(library().cudyn_torch_cached_bytes())


def sleep(offload_tags=()):
    """Copies the allocations of ``offload_tags`` to pinned host memory and
    releases the physical memory of every awake allocation; the addresses
    stay. Returns what it did (allocations, bytes, offloaded_bytes,
    cache_released)."""
    if isinstance(offload_tags, str):
        offload_tags = (offload_tags,)
    array, count = _tag_array(offload_tags)
    report = _Report()
    _check(library().cudyn_torch_sleep(array, count, ctypes.byref(report)))
    return report.as_dict()


def wake_up(tags=None):
    """Maps memory again at the same addresses for the sleeping allocations
    of ``tags`` (None: every tag) and brings offloaded bytes back. Memory of
    tags that were not offloaded is undefined (not zeroed)."""
    report = _Report()
    if tags is None:
        _check(library().cudyn_torch_wake_up(None, 0, ctypes.byref(report)))
    else:
        if isinstance(tags, str):
            tags = (tags,)
        array, count = _tag_array(tags)
        _check(library().cudyn_torch_wake_up(array, count, ctypes.byref(report)))
    return report.as_dict()


def stats():
    """One dict per (tag, device): live, peak, awake, sleeping and offloaded
    bytes, live and sleeping counts."""
    lib = library()
    count = lib.cudyn_torch_stats(None, 0)
    if count < 0:
        _check_last()
    rows = (_TagStats * max(count, 1))()
    written = lib.cudyn_torch_stats(rows, count)
    if written < 0:
        _check_last()
    out = []
    for row in rows[: min(count, written)]:
        entry = {name: int(getattr(row, name)) for name, _ in _TagStats._fields_ if name != "tag"}
        entry["tag"] = row.tag.decode("utf-8")
        out.append(entry)
    return out


def reset():
    """Frees every allocation (awake, asleep or cached) and restores the
    defaults: for tests, and for a process that drops every tensor first."""
    _check(library().cudyn_torch_reset())
