"""Errors are exceptions: one class per ErrorCode, with the C++ error's fields."""

import pickle

import pytest

import cudyn


def test_one_class_per_code():
    for code in cudyn.ErrorCode:
        cls = cudyn.error_class(code)
        assert issubclass(cls, cudyn.Error)
        assert cls.code is code
    assert len({cudyn.error_class(code) for code in cudyn.ErrorCode}) == len(cudyn.ErrorCode)
    assert issubclass(cudyn.InvalidArgument, ValueError)


def test_invalid_argument_before_the_driver(context):
    with pytest.raises(cudyn.InvalidArgument) as caught:
        cudyn.DeviceBuffer(0)
    error = caught.value
    assert error.code is cudyn.ErrorCode.INVALID_ARGUMENT
    assert error.cuda_result == 0
    assert error.entry_point == ""
    assert "count" in str(error)


def test_injected_out_of_memory(context, fake):
    fake.fakecuda_set_fail(b"cuMemAlloc_v2:1+")
    try:
        with pytest.raises(cudyn.OutOfMemory) as caught:
            cudyn.DeviceBuffer(1024)
    finally:
        fake.fakecuda_set_fail(b"")
    error = caught.value
    assert error.cuda_result == 2
    assert error.cuda_error_name == "CUDA_ERROR_OUT_OF_MEMORY"
    assert error.entry_point == "cuMemAlloc_v2"
    assert "CUDA_ERROR_OUT_OF_MEMORY" in str(error)
    # The allocation works again once the fault is gone.
    with cudyn.DeviceBuffer(1024) as buffer:
        assert buffer.nbytes == 1024


def test_injected_driver_error_on_free_surfaces_from_close(context, fake):
    buffer = cudyn.DeviceBuffer(256)
    fake.fakecuda_set_fail(b"cuMemFree_v2:1:CUDA_ERROR_ILLEGAL_ADDRESS")
    try:
        with pytest.raises(cudyn.DriverError) as caught:
            buffer.close()
    finally:
        fake.fakecuda_set_fail(b"")
    assert caught.value.cuda_error_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert caught.value.entry_point == "cuMemFree_v2"


def test_pickles_with_its_fields(context):
    with pytest.raises(cudyn.InvalidArgument) as caught:
        cudyn.DeviceBuffer(0)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is cudyn.InvalidArgument
    assert str(copy) == str(caught.value)
    assert copy.message == caught.value.message
