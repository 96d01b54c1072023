"""DLPack both ways and the CUDA array interface, no copy (checked by address)."""

import ctypes

import numpy
import pytest

import cudyn

capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_is_valid.restype = ctypes.c_int


def test_numpy_reads_pinned_memory_in_place(context):
    with cudyn.PinnedBuffer(4 * 64) as pinned:
        view = pinned.view("float32", (8, 8))
        assert pinned.__dlpack_device__() == (3, 0)
        array = numpy.from_dlpack(view)
        assert array.shape == (8, 8) and array.dtype == numpy.float32
        assert array.ctypes.data == pinned.address
        # Written through the buffer protocol, read through DLPack (NumPy
        # before 2.0 marks every DLPack array read-only).
        numpy.frombuffer(pinned, dtype=numpy.float32)[:] = 1.5
        assert array.sum() == 1.5 * 64
        del array, view
        assert pinned.exports == 0


def test_numpy_reads_managed_memory_in_place(context):
    with cudyn.ManagedBuffer(8 * 100) as managed:
        managed.copy_from(numpy.arange(100, dtype=numpy.int64))
        assert managed.__dlpack_device__() == (13, 0)
        array = numpy.from_dlpack(managed.view(numpy.int64))
        assert array.ctypes.data == managed.address
        assert (array == numpy.arange(100)).all()
        with pytest.raises(cudyn.InvalidArgument, match="ManagedBuffer.close"):
            managed.close()  # the array still points into it
        del array


def test_versioned_and_legacy_capsules(context):
    buffer = cudyn.DeviceBuffer(64)
    legacy = buffer.__dlpack__()
    assert capsule_is_valid(legacy, b"dltensor") == 1
    versioned = buffer.__dlpack__(stream=None, max_version=(1, 0))
    assert capsule_is_valid(versioned, b"dltensor_versioned") == 1
    old = buffer.__dlpack__(max_version=(0, 8))
    assert capsule_is_valid(old, b"dltensor") == 1
    assert buffer.exports == 3
    del legacy, versioned, old  # unconsumed capsules release their exports
    assert buffer.exports == 0
    buffer.close()


def test_dlpack_arguments_checked(context):
    buffer = cudyn.DeviceBuffer(64)
    with pytest.raises(BufferError):
        buffer.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        buffer.__dlpack__(dl_device=(2, 1))
    with pytest.raises(BufferError):
        buffer.__dlpack__(stream=0)
    assert buffer.__dlpack__(dl_device=(2, 0), copy=False, stream=1) is not None
    assert buffer.exports == 0


def test_cuda_array_interface(context):
    buffer = cudyn.DeviceBuffer(4 * 12)
    interface = buffer.view("<f4", (3, 4)).__cuda_array_interface__
    assert interface["version"] == 3
    assert interface["shape"] == (3, 4)
    assert interface["typestr"] == "<f4"
    assert interface["data"] == (buffer.device_address, False)
    assert interface["strides"] is None and interface["stream"] is None
    assert buffer.__cuda_array_interface__["typestr"] == "|u1"


def test_views_check_their_shape(context):
    buffer = cudyn.DeviceBuffer(10)
    with pytest.raises(cudyn.InvalidArgument, match="whole number"):
        buffer.view("float32")
    with pytest.raises(cudyn.InvalidArgument, match="needs 12 bytes"):
        buffer.view("float32", 3)
    with pytest.raises(cudyn.InvalidArgument, match="unknown dtype"):
        buffer.view("float7")
    view = buffer.view(numpy.dtype("uint16"), (5,))
    assert (view.dtype, view.shape, view.nbytes, view.itemsize, view.ndim) == ("uint16", (5,), 10, 2, 1)
    assert view.base is buffer
    assert buffer.view("bfloat16").dtype == "bfloat16"


def test_from_dlpack_wraps_without_copy(context):
    buffer = cudyn.DeviceBuffer(256)
    span = cudyn.from_dlpack(buffer.view("float32"))
    assert isinstance(span, cudyn.Span)
    assert span.device_address == buffer.device_address and span.nbytes == 256
    span.copy_from(b"\x01" * 256)
    assert buffer.to_bytes() == b"\x01" * 256
    assert buffer.exports >= 1
    span.close()
    assert buffer.exports == 0


def test_from_dlpack_numpy_host_memory_is_refused():
    with pytest.raises(cudyn.InvalidArgument, match="not CUDA memory"):
        cudyn.from_dlpack(numpy.zeros(4))


def test_from_dlpack_pinned_is_host_memory(context):
    pinned = cudyn.PinnedBuffer(32)
    span = cudyn.from_dlpack(pinned)
    assert span.__dlpack_device__() == (3, 0)
    assert span.address == pinned.address
    span.set_bytes(4)
    assert pinned.to_bytes() == b"\x04" * 32


class ForeignArray:
    """An object exposing only the CUDA array interface, as CuPy or Numba arrays do."""

    def __init__(self, buffer, stream=None):
        self.buffer = buffer
        self.__cuda_array_interface__ = {"shape": (buffer.nbytes // 4,), "typestr": "<i4",
                                         "data": (buffer.device_address, False), "version": 3,
                                         "strides": None, "stream": stream}


def test_from_cuda_array_interface(context):
    buffer = cudyn.DeviceBuffer(64)
    with cudyn.Stream() as stream:
        foreign = ForeignArray(buffer, stream.handle)
        buffer.set_bytes(2, stream=stream)
        span = cudyn.from_dlpack(foreign)  # waits for the interface's stream
        assert span.owner is foreign
        assert span.to_bytes() == b"\x02" * 64
        assert span.__dlpack_device__() == (2, 0)


def test_span_bounds(context):
    buffer = cudyn.DeviceBuffer(100)
    span = buffer.span(10, 20)
    assert span.device_address == buffer.device_address + 10 and len(span) == 20
    assert len(buffer.span(90)) == 10
    with pytest.raises(cudyn.InvalidArgument, match="exceeds"):
        buffer.span(90, 20)
    del span
