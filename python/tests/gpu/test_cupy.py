"""CuPy on cudyn memory (DLPack and the CUDA array interface) and back."""

import numpy
import pytest

import cudyn

cupy = pytest.importorskip("cupy")
try:
    cupy.cuda.runtime.getDeviceCount()
except Exception:  # no device for CuPy
    pytest.skip("no CUDA device for CuPy", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def same_context():
    cupy.cuda.Device(0).use()
    cudyn.use_device(0)


def test_cupy_through_dlpack_and_the_array_interface():
    buffer = cudyn.DeviceBuffer(8 * 1000)
    through_dlpack = cupy.from_dlpack(buffer.view("float64"))
    through_interface = cupy.asarray(buffer.view("float64", (10, 100)))
    assert through_dlpack.data.ptr == through_interface.data.ptr == buffer.device_address
    through_dlpack[:] = 2.0
    through_interface *= 3.0  # a CuPy kernel writes
    cupy.cuda.Device(0).synchronize()
    assert (numpy.frombuffer(buffer.to_bytes(), dtype=numpy.float64) == 6.0).all()


def test_cudyn_wraps_a_cupy_array():
    array = cupy.arange(256, dtype=cupy.int32)
    through_dlpack = cudyn.from_dlpack(array)
    through_interface = cudyn.from_cuda_array_interface(array)
    assert through_dlpack.device_address == through_interface.device_address == array.data.ptr
    assert numpy.array_equal(numpy.frombuffer(through_dlpack.to_bytes(), dtype=numpy.int32), cupy.asnumpy(array))


def test_managed_buffer_for_cupy():
    managed = cudyn.ManagedBuffer(4 * 128)
    numpy.frombuffer(managed, dtype=numpy.float32)[:] = 1.5
    array = cupy.asarray(managed.view("float32"))
    assert float(array.sum()) == 1.5 * 128
