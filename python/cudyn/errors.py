"""cudyn's exceptions: one class per C++ ``cudyn::ErrorCode``.

Every failing call raises an instance of a subclass of :class:`Error`. The
attributes carry what the C++ ``cudyn::Error`` carries: the kind of failure
(:attr:`Error.code`), the ``CUresult`` of the driver call that failed
(:attr:`Error.cuda_result`, 0 when none did), the driver entry point involved
(:attr:`Error.entry_point`) and the message, which begins with the operation's
name.
"""

from __future__ import annotations

import enum
from typing import Dict, Type


class ErrorCode(enum.Enum):
    """What kind of failure an :class:`Error` is (the C++ ``cudyn::ErrorCode``)."""

    NOT_SUPPORTED = "not_supported"
    DRIVER_NOT_FOUND = "driver_not_found"
    STUB_DRIVER = "stub_driver"
    DRIVER_INIT_FAILED = "driver_init_failed"
    DRIVER_REFUSED = "driver_refused"
    INVALID_ARGUMENT = "invalid_argument"
    OUT_OF_MEMORY = "out_of_memory"
    DRIVER = "driver"
    IO = "io"
    TIMEOUT = "timeout"
    PERMISSION_DENIED = "permission_denied"


class Error(Exception):
    """A cudyn call failed.

    Attributes:
        code: the :class:`ErrorCode`.
        cuda_result: the ``CUresult`` the driver returned (0 when no driver
            call failed, e.g. a bad argument caught before the call).
        cuda_error_name: the name of that ``CUresult`` ("CUDA_ERROR_OUT_OF_MEMORY").
        entry_point: the driver entry point involved ("cuMemAlloc_v2"), or "".
        message: what went wrong, in words; ``str(error)`` is the full
            description (entry point, result and message).
    """

    code: ErrorCode = ErrorCode.DRIVER

    def __init__(self, description: str, *, cuda_result: int = 0, cuda_error_name: str = "",
                 entry_point: str = "", message: str = "") -> None:
        super().__init__(description)
        self.cuda_result = cuda_result
        self.cuda_error_name = cuda_error_name
        self.entry_point = entry_point
        self.message = message or description

    def __reduce__(self):  # keeps the keyword attributes through pickling (multiprocessing)
        return (_rebuild, (type(self), str(self), self.cuda_result, self.cuda_error_name,
                           self.entry_point, self.message))


def _rebuild(cls: Type[Error], description: str, cuda_result: int, cuda_error_name: str,
             entry_point: str, message: str) -> Error:
    return cls(description, cuda_result=cuda_result, cuda_error_name=cuda_error_name,
               entry_point=entry_point, message=message)


class NotSupported(Error):
    """The driver or device really lacks the feature or entry point."""
    code = ErrorCode.NOT_SUPPORTED


class DriverNotFound(Error):
    """No driver library could be opened (no NVIDIA driver on this machine)."""
    code = ErrorCode.DRIVER_NOT_FOUND


class StubDriver(Error):
    """The CUDA toolkit's stub libcuda answered instead of a real driver."""
    code = ErrorCode.STUB_DRIVER


class DriverInitFailed(Error):
    """The driver opened but ``cuInit`` failed (no device, version mismatch, ...)."""
    code = ErrorCode.DRIVER_INIT_FAILED


class DriverRefused(Error):
    """The loader refused the configured driver path (e.g. not absolute)."""
    code = ErrorCode.DRIVER_REFUSED


class InvalidArgument(Error, ValueError):
    """cudyn rejected the arguments before calling the driver."""
    code = ErrorCode.INVALID_ARGUMENT


class OutOfMemory(Error):
    """The driver could not allocate (``CUDA_ERROR_OUT_OF_MEMORY``)."""
    code = ErrorCode.OUT_OF_MEMORY


class DriverError(Error):
    """Any other ``CUresult`` from the driver."""
    code = ErrorCode.DRIVER


class IoError(Error):
    """A system call failed, or a channel's peer closed it mid-exchange."""
    code = ErrorCode.IO


class Timeout(Error):
    """A bounded wait (a channel's receive) expired."""
    code = ErrorCode.TIMEOUT


class PermissionDenied(Error):
    """A channel's peer failed the credential check, or a socket path is another user's."""
    code = ErrorCode.PERMISSION_DENIED


_BY_CODE: Dict[str, Type[Error]] = {
    cls.code.value: cls
    for cls in (NotSupported, DriverNotFound, StubDriver, DriverInitFailed, DriverRefused, InvalidArgument,
                OutOfMemory, DriverError, IoError, Timeout, PermissionDenied)
}


def error_class(code: "ErrorCode | str") -> Type[Error]:
    """The exception class raised for an :class:`ErrorCode` (or its name)."""
    name = code.value if isinstance(code, ErrorCode) else code
    return _BY_CODE[name]


def _from_native(code: str, description: str, cuda_result: int, cuda_error_name: str, entry_point: str,
                 message: str) -> Error:
    """Called by the extension module to build the exception it raises."""
    cls = _BY_CODE.get(code, Error)
    return cls(description, cuda_result=cuda_result, cuda_error_name=cuda_error_name if cuda_result else "",
               entry_point=entry_point, message=message)
