"""cudyn: the CUDA driver memory API without linking libcuda.

``import cudyn`` works on every machine: the driver opens at the first call
that needs it, and a machine without one answers with an exception
(:class:`DriverNotFound`, :class:`StubDriver`, :class:`DriverInitFailed`)
instead of failing to import. :func:`driver_status` and :func:`load_report`
say what the loader found.

Memory objects (:class:`DeviceBuffer`, :class:`PinnedBuffer`,
:class:`ZeroCopyBuffer`, :class:`ManagedBuffer`, :class:`Span`,
:class:`ArrayView`) are sized in bytes, are context managers, export DLPack
and the CUDA array interface without copying, and :func:`from_dlpack` wraps
other libraries' CUDA memory (torch, CuPy) as a :class:`Span`.
"""

from __future__ import annotations

from . import errors
from .errors import (Error, ErrorCode, NotSupported, DriverNotFound, StubDriver, DriverInitFailed,
                     DriverRefused, InvalidArgument, OutOfMemory, DriverError, IoError, Timeout,
                     PermissionDenied, error_class)
from ._cudyn import (driver_status, load_report, set_driver_path, cuda_error_name, Location, Device,
                     PrimaryContext, Stream, Event, probe_topology, Memory, Span, ArrayView, from_dlpack,
                     from_cuda_array_interface, DeviceBuffer, PinnedBuffer, ZeroCopyBuffer, ManagedBuffer,
                     PrefetchPlan, enable_peer_access, disable_peer_access, copy_peer,
                     GrowableBuffer, MemoryPool, StreamOrderedBuffer, CopyPlan, PeerPolicy, FdChannel,
                     FdListener, AllocationDescriptor, export_allocation, import_allocation, ImportedAllocation,
                     RangeDescriptor, RangeExporter, import_range, ImportedRange, send_descriptor,
                     receive_allocation, receive_range, ledger_snapshot, ledger_reset_peaks, fingerprint_device,
                     process_state, ProcessCheckpoint)

from ._version import __version__

__all__ = [
    "__version__",
    "errors", "Error", "ErrorCode", "NotSupported", "DriverNotFound", "StubDriver", "DriverInitFailed",
    "DriverRefused", "InvalidArgument", "OutOfMemory", "DriverError", "IoError", "Timeout", "PermissionDenied",
    "error_class", "driver_status", "load_report", "set_driver_path", "cuda_error_name", "Location", "Device",
    "PrimaryContext", "Stream", "Event", "probe_topology", "Memory", "Span", "ArrayView", "from_dlpack",
    "from_cuda_array_interface", "DeviceBuffer", "PinnedBuffer", "ZeroCopyBuffer", "ManagedBuffer",
    "PrefetchPlan", "enable_peer_access", "disable_peer_access", "copy_peer",
    "GrowableBuffer", "MemoryPool", "StreamOrderedBuffer", "CopyPlan", "PeerPolicy", "FdChannel", "FdListener",
    "AllocationDescriptor", "export_allocation", "import_allocation", "ImportedAllocation", "RangeDescriptor",
    "RangeExporter", "import_range", "ImportedRange", "send_descriptor", "receive_allocation", "receive_range",
    "ledger_snapshot", "ledger_reset_peaks", "fingerprint_device", "process_state", "ProcessCheckpoint",
    "use_device",
]

_activated = {}


def use_device(ordinal: int = 0) -> PrimaryContext:
    """Makes device `ordinal`'s primary context current on the calling thread.

    The context stays retained for the life of the process (as CuPy's and
    torch's current device does); the returned :class:`PrimaryContext` is that
    one. Allocations and streams made afterwards on this thread belong to it.
    """
    context = _activated.get(ordinal)
    if context is None:
        context = PrimaryContext.activate(Device(ordinal))
        _activated[ordinal] = context
    else:
        context.make_current()
    return context
