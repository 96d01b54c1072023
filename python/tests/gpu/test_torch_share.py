"""A torch tensor exported with export_allocation to another Python process,
which reads it with torch (legacy IPC for torch's cuMemAlloc memory)."""

import os
import subprocess
import sys
import textwrap

import pytest

import cudyn

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)

CHILD = """
    import os, struct, torch, cudyn
    torch.cuda.set_device(0)
    cudyn.use_device(0)
    channel = cudyn.FdChannel.adopt(int(os.environ["CHANNEL_FD"]))
    with cudyn.import_allocation(cudyn.receive_allocation(channel, timeout=60)) as imported:
        tensor = torch.from_dlpack(imported.view("float32"))
        total = float(tensor.sum().item())
        tensor.mul_(2.0)  # written in place, for the parent to see
        torch.cuda.synchronize()
        del tensor
    channel.send(1, struct.pack("<d", total))
"""


def test_torch_tensor_to_another_process():
    import struct
    torch.cuda.set_device(0)
    cudyn.use_device(0)
    tensor = torch.arange(10000, dtype=torch.float32, device="cuda")[16:]  # not the allocation's start
    descriptor = cudyn.export_allocation(cudyn.from_dlpack(tensor))
    assert descriptor.nbytes == tensor.numel() * 4
    expected = float(tensor.sum().item())
    ours, theirs = cudyn.FdChannel.pair()
    environment = dict(os.environ, CHANNEL_FD=str(theirs.fileno()))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD)], pass_fds=(theirs.fileno(),),
                             env=environment, stderr=subprocess.PIPE, text=True)
    theirs.close()
    cudyn.send_descriptor(ours, descriptor)
    (total,) = struct.unpack("<d", ours.receive(1, timeout=120))
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert total == expected
    assert torch.equal(tensor, torch.arange(16, 10000, dtype=torch.float32, device="cuda") * 2.0)
