"""Checkpoint and restore of a child process on the fake driver."""

import os
import subprocess
import sys
import textwrap

import pytest

import cudyn

TARGET = """
    import sys, cudyn
    cudyn.use_device(0)
    buffer = cudyn.DeviceBuffer(4096)
    buffer.set_bytes(0x3C)
    print("ready", flush=True)
    sys.stdin.readline()  # the parent checkpoints and restores meanwhile
    assert buffer.to_bytes() == b"\\x3c" * 4096
    print("intact", flush=True)
"""


def test_checkpoint_and_restore_a_child():
    cudyn.driver_status()
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(TARGET)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert child.stdout.readline().strip() == "ready"
        assert cudyn.process_state(child.pid) == "running"
        with cudyn.ProcessCheckpoint.lock(child.pid, timeout=10) as checkpoint:
            assert checkpoint.state == "locked"
            checkpoint.checkpoint()
            assert cudyn.process_state(child.pid) == "checkpointed"
            checkpoint.restore()
            assert checkpoint.state == "locked"
            assert checkpoint.failure is None
        assert cudyn.process_state(child.pid) == "running"
        out, err = child.communicate("go\n", timeout=60)
        assert child.returncode == 0, err
        assert out.strip() == "intact"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_checkpoint_of_no_process_is_refused():
    cudyn.driver_status()
    with pytest.raises(cudyn.Error):
        cudyn.ProcessCheckpoint.lock(-1)
