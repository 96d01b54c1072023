#!/usr/bin/env python3
"""Weight sync between a trainer and an inference process, with cudyn.

The trainer keeps its weights in one shareable GrowableBuffer and publishes
the whole range once (RangeExporter); the inference process maps it
(import_range) and computes on it in place. When the trainer grows the
weights (a new layer) and updates them, it sends only what changed
(RangeExporter.update); the inference process follows with apply(): same
address, nothing copied between the processes.

    PYTHONPATH=<builddir>/python python3 examples/python/weight_sync.py

Computes with torch on a GPU machine (torch.from_dlpack on the cudyn
memory); elsewhere, on cudyn's fake driver, with numpy over a host copy.
Exits 0 when the inference results match the trainer's, 1 otherwise.
"""

import os
import struct
import subprocess
import sys

import numpy

import cudyn

WIDTH = 1024           # every layer is a WIDTH x WIDTH float32 matrix (4 MiB: growth maps new chunks)
LAYER_BYTES = WIDTH * WIDTH * 4
RESULT = 0x52534C54    # the inference process's answer: layer count and sum(x)
NEXT = 0x4E455854      # the trainer's word before each step: the layer count (a range descriptor follows), 0 to stop


def torch_on_gpu():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def layers_of(memory, count):
    """The first `count` layers of the weights as a (count, WIDTH, WIDTH) array: torch on the GPU, numpy elsewhere."""
    torch = torch_on_gpu()
    view = memory.view("float32", (count, WIDTH, WIDTH))
    if torch is not None:
        return torch.from_dlpack(view)  # no copy: the tensor's pointer is the range's
    return numpy.frombuffer(memory.span(0, count * LAYER_BYTES).to_bytes(), dtype=numpy.float32).reshape(
        count, WIDTH, WIDTH)


def forward(layers, count):
    """The model: x -> tanh(W_i x) through every layer; returns sum(x)."""
    torch = torch_on_gpu()
    if torch is not None:
        x = torch.ones(WIDTH, device="cuda")
        for i in range(count):
            x = torch.tanh(layers[i] @ x)
        return float(x.sum().item())
    x = numpy.ones(WIDTH, dtype=numpy.float32)
    for i in range(count):
        x = numpy.tanh(layers[i] @ x)
    return float(x.sum())


def write_layers(weights, first, count, seed):
    """The trainer's update: layers first..first+count-1, written into the range."""
    # Scaled so that activations stay of order one through the layers.
    values = (numpy.random.default_rng(seed).standard_normal((count, WIDTH, WIDTH)) / numpy.sqrt(WIDTH)).astype(
        numpy.float32)
    torch = torch_on_gpu()
    span = weights.span(first * LAYER_BYTES, count * LAYER_BYTES)
    if torch is not None:
        torch.from_dlpack(span.view("float32", (count, WIDTH, WIDTH))).copy_(torch.from_numpy(values))
        torch.cuda.synchronize()
    else:
        span.copy_from(values)


def inference(channel_fd):
    cudyn.use_device(0)
    channel = cudyn.FdChannel.adopt(channel_fd)
    weights = None
    while True:
        (count,) = struct.unpack("<q", channel.receive(NEXT, timeout=60))
        if count == 0:
            break
        descriptor = cudyn.receive_range(channel, timeout=60)
        if weights is None:
            weights = cudyn.import_range(descriptor)  # the whole range, once
        else:
            weights.apply(descriptor)  # what changed; the address stays
        layers = layers_of(weights, count)
        channel.send(RESULT, struct.pack("<qd", count, forward(layers, count)))
        del layers  # the next apply() may remap the range
    weights.close()


def trainer():
    cudyn.use_device(0)
    weights = cudyn.GrowableBuffer(64 * LAYER_BYTES, shareable=True)
    weights.grow_to(2 * LAYER_BYTES)
    write_layers(weights, 0, 2, seed=1)
    exporter = cudyn.RangeExporter(weights)

    ours, theirs = cudyn.FdChannel.pair()
    child = subprocess.Popen([sys.executable, __file__, "--inference", str(theirs.fileno())],
                             pass_fds=(theirs.fileno(),), env=dict(os.environ))
    theirs.close()
    ok = True
    layers = 2
    for step, (grown, seed) in enumerate([(2, None), (3, 2), (5, 3)]):
        if seed is not None:  # grow by new layers and retrain the last old one
            weights.grow_to(grown * LAYER_BYTES)
            write_layers(weights, layers - 1, grown - layers + 1, seed)
            layers = grown
        ours.send(NEXT, struct.pack("<q", layers))
        cudyn.send_descriptor(ours, exporter.describe() if step == 0 else exporter.update())
        count, theirs_result = struct.unpack("<qd", ours.receive(RESULT, timeout=60))
        mine = forward(layers_of(weights, layers), layers)
        match = count == layers and abs(mine - theirs_result) <= 1e-3 * max(1.0, abs(mine))
        ok = ok and match
        print(f"step {step}: {layers} layers ({weights.nbytes >> 20} MiB mapped) at {weights.device_address:#x}, "
              f"trainer {mine:.6f}, inference {theirs_result:.6f} ({'match' if match else 'MISMATCH'})")
    ours.send(NEXT, struct.pack("<q", 0))
    child.wait(timeout=60)
    ok = ok and child.returncode == 0
    print("weight sync:", "ok" if ok else "FAILED", "(torch on the GPU)" if torch_on_gpu() else "(numpy, host copies)")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inference":
        inference(int(sys.argv[2]))
        sys.exit(0)
    try:
        sys.exit(trainer())
    except cudyn.NotSupported as error:  # no VMM or shareable memory on this driver or device
        print("weight sync needs shareable VMM memory:", error)
        sys.exit(0)
