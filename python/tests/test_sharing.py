"""Sharing with another process over a descriptor channel: one allocation,
and a whole range the child follows as the parent grows it."""

import os
import subprocess
import sys
import textwrap

import pytest

import cudyn

ACK = 0x41434B00  # the children's acknowledgement tag


def start_child(program: str, channel: cudyn.FdChannel) -> subprocess.Popen:
    """A child Python process running `program`, given `channel`'s descriptor as CHANNEL_FD."""
    fd = channel.fileno()
    environment = dict(os.environ, CHANNEL_FD=str(fd))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(program)], pass_fds=(fd,), env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(child: subprocess.Popen) -> str:
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    return out


CHILD_ALLOCATION = """
    import os, cudyn
    cudyn.use_device(0)
    with cudyn.FdChannel.adopt(int(os.environ["CHANNEL_FD"])) as channel:
        descriptor = cudyn.receive_allocation(channel, timeout=30)
        with cudyn.import_allocation(descriptor) as memory:
            data = memory.to_bytes()
            memory.set_bytes(0x77)  # written back for the parent to see
        channel.send(0x41434B00, data[:4] + len(data).to_bytes(8, "little"))
"""


def test_allocation_to_a_child(context):
    parent, child_end = cudyn.FdChannel.pair()
    child = start_child(CHILD_ALLOCATION, child_end)
    child_end.close()
    buffer = cudyn.DeviceBuffer(1 << 16)
    buffer.copy_from(b"\x01\x02\x03\x04" * (1 << 14))
    descriptor = cudyn.export_allocation(buffer)
    assert descriptor.kind == "legacy_ipc" and descriptor.nbytes == 1 << 16
    assert descriptor.exporter_pid == os.getpid()
    cudyn.send_descriptor(parent, descriptor)
    reply = parent.receive(ACK, timeout=30)
    assert reply[:4] == b"\x01\x02\x03\x04" and int.from_bytes(reply[4:], "little") == 1 << 16
    finish(child)
    assert buffer.to_bytes() == b"\x77" * (1 << 16)
    parent.close()


CHILD_RANGE = """
    import os, cudyn
    cudyn.use_device(0)
    channel = cudyn.FdChannel.adopt(int(os.environ["CHANNEL_FD"]))
    imported = cudyn.import_range(cudyn.receive_range(channel, timeout=30))
    def report():
        first = imported.span(imported.nbytes - 1, 1).to_bytes() if imported.nbytes else b"\\x00"
        channel.send(0x41434B00, imported.nbytes.to_bytes(8, "little") + first +
                     imported.generation.to_bytes(8, "little"))
    report()
    while True:
        update = cudyn.receive_range(channel, timeout=30)
        address = imported.device_address
        imported.apply(update)
        assert imported.device_address == address  # the range follows in place
        report()
        if imported.nbytes == 0:
            break
    imported.close()
"""


def test_child_follows_a_growing_range(context):
    growable = cudyn.GrowableBuffer(64 << 20, shareable=True)
    chunk = growable.chunk_size
    growable.grow_to(chunk)
    growable.set_bytes(1)
    exporter = cudyn.RangeExporter(growable)
    parent, child_end = cudyn.FdChannel.pair()
    child = start_child(CHILD_RANGE, child_end)
    child_end.close()

    def reply():
        payload = parent.receive(ACK, timeout=30)
        return int.from_bytes(payload[:8], "little"), payload[8], int.from_bytes(payload[9:], "little")

    cudyn.send_descriptor(parent, exporter.describe())
    assert reply() == (chunk, 1, 1)
    growable.grow_to(3 * chunk)
    growable.span(chunk).set_bytes(2)
    update = exporter.update()
    assert update.is_update and update.generation == 2
    cudyn.send_descriptor(parent, update)
    assert reply() == (3 * chunk, 2, 2)
    growable.shrink_to(0)
    cudyn.send_descriptor(parent, exporter.update())
    payload = parent.receive(ACK, timeout=30)
    assert int.from_bytes(payload[:8], "little") == 0
    finish(child)
    parent.close()


def test_range_export_needs_a_shareable_buffer(context):
    growable = cudyn.GrowableBuffer(8 << 20)
    growable.grow_to(1)
    with pytest.raises(cudyn.Error):
        cudyn.RangeExporter(growable)
    with pytest.raises(TypeError):
        cudyn.RangeExporter(cudyn.DeviceBuffer(16))


def test_receive_times_out():
    first, second = cudyn.FdChannel.pair()
    with pytest.raises(cudyn.Timeout):
        cudyn.receive_range(first, timeout=0.05)
    assert first.peer()["pid"] == os.getpid()
    first.close()
    second.close()


def test_channel_peer_closed_is_io():
    first, second = cudyn.FdChannel.pair()
    second.close()
    with pytest.raises(cudyn.IoError):
        first.receive(ACK, timeout=1)


def test_listener_and_policy(tmp_path):
    path = str(tmp_path / "cudyn.sock")
    policy = cudyn.PeerPolicy().require_pid(os.getpid())
    assert "pid" in repr(policy)
    with cudyn.FdListener(path, policy) as listener:
        client = cudyn.FdChannel.connect(path, timeout=5)
        server = listener.accept(timeout=5)
        client.send(7, b"hello")
        assert server.receive(7, timeout=5) == b"hello"
        with pytest.raises(cudyn.InvalidArgument):
            server.send(7, b"x")
            client.receive(8, timeout=5)
