"""Device, PrimaryContext, Stream, Event and the topology on the fake's two devices."""

import threading

import pytest

import cudyn


def test_devices():
    assert cudyn.Device.count() == 2
    device = cudyn.Device(1)
    assert device.ordinal == 1
    assert device.name
    assert device.total_memory > 0
    major, minor = device.compute_capability
    assert major >= 1 and minor >= 0
    assert cudyn.Device.by_uuid(device.uuid) == device
    assert cudyn.Device.by_pci_bus_id(device.pci_bus_id) == device
    assert device.attribute(75) == major  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    assert repr(device) == "cudyn.Device(1)"
    assert cudyn.Device(0) != device


def test_device_out_of_range():
    with pytest.raises(cudyn.Error) as caught:
        cudyn.Device(7)
    assert caught.value.code in (cudyn.ErrorCode.INVALID_ARGUMENT, cudyn.ErrorCode.DRIVER)


def test_topology():
    topology = cudyn.probe_topology()
    assert topology["device_count"] == 2
    assert [(link["from"], link["to"]) for link in topology["links"]] == [(0, 1), (1, 0)]


def test_primary_context_as_context_manager():
    with cudyn.PrimaryContext.activate(cudyn.Device(1)) as context:
        assert context.device.ordinal == 1
        assert context.handle != 0
        with cudyn.DeviceBuffer(64) as buffer:
            assert buffer.__dlpack_device__() == (2, 1)
    cudyn.use_device(0)  # the other tests' context, current again


def test_stream_and_events(context):
    with cudyn.Stream() as stream, cudyn.Event() as start, cudyn.Event() as end:
        assert stream.owned and stream.handle != 0
        buffer = cudyn.DeviceBuffer(1 << 16)
        start.record(stream)
        buffer.set_bytes(7, stream=stream)
        end.record(stream)
        end.synchronize()
        assert end.query()
        assert cudyn.Event.elapsed_ms(start, end) >= 0.0
        stream.synchronize()
        assert stream.query()
        assert buffer.to_bytes() == b"\x07" * (1 << 16)
    with pytest.raises(cudyn.Error):
        stream.synchronize()  # destroyed by the with block


def test_events_without_timing_refuse_elapsed(context):
    with cudyn.Event(timing=False) as start, cudyn.Event(timing=False) as end:
        start.record()
        end.record()
        end.synchronize()
        with pytest.raises(cudyn.Error):
            cudyn.Event.elapsed_ms(start, end)


def test_synchronize_releases_the_gil(context, fake):
    # Stream work waits 50 ms before it starts: another Python thread must run meanwhile.
    fake.fakecuda_set_stream_delay_us(50_000)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    try:
        with cudyn.Stream() as stream:
            buffer = cudyn.DeviceBuffer(64)
            buffer.set_bytes(1, stream=stream)
            worker = threading.Thread(target=tick)
            worker.start()
            stream.synchronize()
            stop.set()
            worker.join()
    finally:
        fake.fakecuda_set_stream_delay_us(200)
    assert len(ticks) > 5
