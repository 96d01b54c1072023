"""The owning buffers: sizes, copies, close(), context managers, host access."""

import numpy
import pytest

import cudyn


def test_device_buffer_round_trip(context):
    with cudyn.DeviceBuffer(1024) as buffer:
        assert buffer.nbytes == len(buffer) == 1024
        assert buffer.address == buffer.device_address != 0
        payload = bytes(range(256)) * 4
        buffer.copy_from(payload)
        assert buffer.to_bytes() == payload
        out = bytearray(1024)
        buffer.copy_to(out)
        assert bytes(out) == payload
        array = numpy.arange(256, dtype=numpy.float32)
        buffer.copy_from(array)
        back = numpy.empty(256, dtype=numpy.float32)
        buffer.copy_to(back)
        assert (back == array).all()
    assert buffer.closed


def test_device_to_device_and_stream_copies(context):
    source = cudyn.DeviceBuffer(4096)
    destination = cudyn.DeviceBuffer(4096)
    source.set_bytes(0x5A)
    with cudyn.Stream() as stream:
        destination.copy_from(source, stream=stream)
        stream.synchronize()
    assert destination.to_bytes() == b"\x5a" * 4096
    source.close()
    destination.close()


def test_copy_size_and_layout_checked(context):
    buffer = cudyn.DeviceBuffer(16)
    with pytest.raises(cudyn.InvalidArgument, match="Memory.copy_from: the source holds 32 bytes"):
        buffer.copy_from(bytes(32))
    with pytest.raises(cudyn.InvalidArgument, match="not contiguous"):
        buffer.copy_from(numpy.zeros((4, 4), dtype=numpy.uint8)[:, ::2])
    with pytest.raises(TypeError):
        buffer.copy_from("text")
    with pytest.raises(cudyn.InvalidArgument):
        buffer.set_bytes(256)
    with pytest.raises(TypeError, match="stream argument"):
        buffer.set_bytes(1, stream="default")
    stream = cudyn.Stream()
    stream.destroy()
    with pytest.raises(cudyn.InvalidArgument, match="the Stream was destroyed"):
        buffer.set_bytes(1, stream=stream)  # not taken for the legacy default stream


def test_closed_buffer_refuses_use(context):
    buffer = cudyn.DeviceBuffer(64)
    buffer.close()
    buffer.close()  # a second close does nothing
    with pytest.raises(cudyn.InvalidArgument, match="DeviceBuffer was closed"):
        buffer.to_bytes()
    with pytest.raises(cudyn.InvalidArgument):
        buffer.nbytes


def test_pinned_buffer_is_host_memory(context):
    with cudyn.PinnedBuffer(64) as pinned:
        view = memoryview(pinned)
        view[:4] = b"abcd"
        assert pinned.exports == 1
        with pytest.raises(cudyn.InvalidArgument, match="export"):
            pinned.close()
        view.release()
        assert pinned.exports == 0
        assert pinned.to_bytes()[:4] == b"abcd"
        assert pinned.device_address == 0
        assert not hasattr(pinned, "__cuda_array_interface__")
        device = cudyn.DeviceBuffer(64)
        device.copy_from(pinned)
        assert device.to_bytes()[:4] == b"abcd"


def test_zero_copy_buffer_device_writes_host_reads(context):
    with cudyn.ZeroCopyBuffer(256, portable=True) as mapped:
        assert mapped.device_address != 0
        mapped.span().set_bytes(9)  # through the device address
        assert bytes(memoryview(mapped)) == b"\x09" * 256


def test_managed_buffer_advice_and_prefetch(context):
    with cudyn.ManagedBuffer(1 << 16) as managed:
        array = numpy.frombuffer(managed, dtype=numpy.uint32)
        array[:] = 3
        managed.set_read_mostly()
        managed.set_preferred_location(cudyn.Location.device(0))
        managed.set_accessed_by(cudyn.Location.device(1))
        with cudyn.Stream() as stream:
            managed.prefetch_to(cudyn.Location.device(0), stream=stream)
            stream.synchronize()
        managed.prefetch_to(cudyn.Location.host())
        assert (array == 3).all()
        del array
    with pytest.raises(cudyn.InvalidArgument):
        cudyn.ManagedBuffer(1 << 16).prefetch_to(cudyn.Location.device(-1))


def test_prefetch_plan(context):
    first = cudyn.ManagedBuffer(1 << 16)
    second = cudyn.ManagedBuffer(1 << 16)
    plan = cudyn.PrefetchPlan()
    plan.add(first, cudyn.Location.device(0))
    plan.add(second.span(0, 4096), cudyn.Location.device(1))
    plan.add_discard_and_prefetch(second.span(4096), cudyn.Location.host())
    assert len(plan) == 3
    with cudyn.Stream() as stream:
        plan.execute(stream)
        stream.synchronize()
    plan.execute()
    with pytest.raises(cudyn.InvalidArgument, match="not managed memory"):
        plan.add(cudyn.DeviceBuffer(64), cudyn.Location.device(0))


def test_copy_peer_between_devices():
    zero = cudyn.use_device(0)
    source = cudyn.DeviceBuffer(4096)
    source.set_bytes(0x21)
    one = cudyn.use_device(1)
    destination = cudyn.DeviceBuffer(4096)
    cudyn.enable_peer_access(one, zero)
    cudyn.copy_peer(destination, one, source, zero)
    assert destination.to_bytes() == b"\x21" * 4096
    assert destination.__dlpack_device__() == (2, 1)
    cudyn.disable_peer_access(one, zero)
    cudyn.use_device(0)
