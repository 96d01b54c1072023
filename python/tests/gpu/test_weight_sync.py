"""examples/python/weight_sync.py on the real driver: torch computes on the range."""

import os
import pathlib
import subprocess
import sys

import pytest

import cudyn

try:
    cudyn.driver_status()
    have_device = cudyn.Device.count() > 0
except cudyn.Error:
    have_device = False
if not have_device:
    pytest.skip("no CUDA driver or device", allow_module_level=True)

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "python" / "weight_sync.py"


def test_weight_sync_example():
    result = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    try:
        import torch
        on_gpu = torch.cuda.is_available()
    except ImportError:
        on_gpu = False
    expected = "weight sync: ok (torch on the GPU)" if on_gpu else "weight sync: ok (numpy, host copies)"
    assert expected in result.stdout, result.stdout
