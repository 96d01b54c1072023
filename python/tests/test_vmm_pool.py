"""GrowableBuffer, MemoryPool, StreamOrderedBuffer and CopyPlan on the fake."""

import numpy
import pytest

import cudyn


def test_growable_buffer_grows_in_place(context):
    with cudyn.GrowableBuffer(64 << 20) as growable:
        chunk = growable.chunk_size
        assert growable.nbytes == 0 and growable.capacity >= 64 << 20
        growable.grow_to(chunk)
        address = growable.device_address
        growable.copy_from(b"\x11" * chunk)
        growable.grow_to(3 * chunk)
        assert growable.device_address == address and growable.nbytes == 3 * chunk
        assert growable.chunk_count == 3
        assert growable.span(0, chunk).to_bytes() == b"\x11" * chunk
        view = growable.view("uint8")
        with pytest.raises(cudyn.InvalidArgument, match="shrink_to: 1 export"):
            growable.shrink_to(chunk)
        del view
        growable.shrink_to(chunk)
        assert growable.nbytes == chunk


def test_growable_release_and_restore_keep_saved_bytes(context):
    growable = cudyn.GrowableBuffer(16 << 20)
    growable.grow_to(growable.chunk_size)
    growable.set_bytes(0x42)
    growable.release_physical(save=True)
    assert growable.released and growable.nbytes == 0
    growable.restore()
    assert not growable.released
    assert growable.to_bytes() == b"\x42" * growable.chunk_size
    growable.close()
    with pytest.raises(cudyn.InvalidArgument, match="GrowableBuffer was closed"):
        growable.grow_to(1)


def test_growable_beyond_capacity_is_refused(context):
    growable = cudyn.GrowableBuffer(4 << 20)
    with pytest.raises(cudyn.InvalidArgument):
        growable.grow_to(growable.capacity + 1)
    assert growable.nbytes == 0  # the previous state is kept


def test_pool_and_stream_ordered_buffer(context):
    with cudyn.MemoryPool(0) as pool, cudyn.Stream() as stream:
        pool.release_threshold = 1 << 20
        assert pool.release_threshold == 1 << 20
        pool.set_reuse("allow_opportunistic", False)
        buffer = cudyn.StreamOrderedBuffer(4096, stream, pool)
        buffer.set_bytes(3, stream=stream)
        assert buffer.__cuda_array_interface__["stream"] == stream.handle
        assert buffer.to_bytes() == b"\x03" * 4096  # waits for the stream first
        assert pool.usage()["used_bytes"] >= 4096
        buffer.close()
        stream.synchronize()
        pool.trim_to(0)
    with pytest.raises(cudyn.InvalidArgument, match="a stream is required"):
        cudyn.StreamOrderedBuffer(64, None)
    with pytest.raises(cudyn.InvalidArgument, match="unknown policy"):
        cudyn.MemoryPool.default_for(0).set_reuse("sometimes", True)


def test_copy_plan_batches(context):
    sources = [cudyn.DeviceBuffer(256) for _ in range(4)]
    for index, source in enumerate(sources):
        source.set_bytes(index + 1)
    host = [numpy.zeros(256, dtype=numpy.uint8) for _ in sources]
    plan = cudyn.CopyPlan()
    for destination, source in zip(host, sources):
        plan.add(destination, source)
    assert len(plan) == 4
    with cudyn.Stream() as stream:
        assert plan.execute(stream) == "batch13000"
        stream.synchronize()
    assert [int(array[0]) for array in host] == [1, 2, 3, 4]
    assert plan.execute() == "per_copy"
    with pytest.raises(cudyn.InvalidArgument, match="CopyPlan.add"):
        plan.add(host[0], cudyn.DeviceBuffer(128))


def test_ledger_counts_buffers(context):
    before = cudyn.ledger_snapshot()
    assert before["enabled"]
    buffer = cudyn.DeviceBuffer(1 << 20)
    during = cudyn.ledger_snapshot()
    assert during["live_bytes"] - before["live_bytes"] == 1 << 20
    row = next(entry for entry in during["entries"] if entry["kind"] == "device" and entry["device"] == 0)
    assert row["live_count"] >= 1
    del buffer  # garbage collection frees it
    assert cudyn.ledger_snapshot()["live_bytes"] == before["live_bytes"]


def test_fingerprint_has_the_info_schema():
    fingerprint = cudyn.fingerprint_device(0)
    assert fingerprint["version"] == 2
    assert fingerprint["newest_ptx_isa"] == "9.0"
    trials = fingerprint["trials"]
    assert len(trials) == 16
    for trial in trials.values():
        assert set(trial) == {"outcome", "driver_result", "ms", "detail"}
        assert trial["outcome"] in ("works", "refused", "failed", "skipped", "timed_out")
    assert sum(trial["outcome"] == "works" for trial in trials.values()) == 12
