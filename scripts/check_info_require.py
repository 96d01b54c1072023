#!/usr/bin/env python3
"""Checks cudyn-info's topology conditions: `--require all_pairs_peer_access,
fabric_healthy,nvlinks_active` exits 0 where they hold and 4 where one does
not, naming on stderr what failed, on the fake driver with the fake NVML;
and that --require, of a condition or a trial, exits 1 where no device is
usable (no driver, or a driver whose cuInit fails), as --require-gpu does.

    check_info_require.py CUDYN_INFO FAKE_DRIVER FAKE_NVML

Runs CUDYN_INFO --no-trials with CUDYN_DRIVER_PATH=FAKE_DRIVER, two devices
and CUDYN_NVML_PATH=FAKE_NVML under each scenario below (the fakes' own
knobs), then once with NVML missing, then with no driver and with
CUDA_ERROR_NO_DEVICE from cuInit (trials run there: nothing to run them on). Exit 0 when every exit code and reason
is as expected; 1 with one line per problem otherwise.
"""
import os
import subprocess
import sys

ALL = "all_pairs_peer_access,fabric_healthy,nvlinks_active"

# (what, extra environment, conditions, exit code, text stderr must hold)
SCENARIOS = [
    ("healthy node", {}, ALL, 0, ""),
    ("a pair without peer access", {"FAKECUDA_NO_PEER": "0:1"}, "all_pairs_peer_access", 4,
     "device 0 cannot reach device 1"),
    ("a degraded fabric", {"FAKENVML_FABRIC": "degraded"}, "fabric_healthy", 4,
     "device 0: degraded bandwidth, route unhealthy"),
    ("registration in progress", {"FAKENVML_FABRIC": "in_progress"}, "fabric_healthy", 4,
     "fabric registration in progress"),
    ("no fabric", {"FAKENVML_FABRIC": "none"}, "fabric_healthy", 4, "the GPU is in no NVLink fabric"),
    ("registered in no cluster", {"FAKENVML_FABRIC": "standalone"}, "fabric_healthy", 4,
     "in no fabric cluster (cluster UUID all zero)"),
    ("a link down", {"FAKENVML_NVLINK_DOWN": "1:5"}, "nvlinks_active", 4, "device 1: link 5 is not active"),
    ("no NVLink", {"FAKENVML_NVLINKS": "0"}, "nvlinks_active", 4, "device 0: no NVLink"),
    ("an unknown name is a usage error", {}, "fabric_healthy,bogus", 2,
     "no trial or condition named 'bogus'"),
    ("NVML missing", {"CUDYN_NVML_PATH": "/nonexistent/cudyn-test/libnvidia-ml.so.1"}, "fabric_healthy", 4,
     "NVML is not usable"),
    ("a condition with no driver", {"CUDYN_DRIVER_PATH": "/nonexistent/cudyn-test/libcuda.so.1"},
     "all_pairs_peer_access", 1, "--require: no usable GPU (could not open"),
    ("a trial with no driver", {"CUDYN_DRIVER_PATH": "/nonexistent/cudyn-test/libcuda.so.1"},
     "vmm_posix_fd", 1, "--require: no usable GPU (could not open"),
    ("a trial where cuInit finds no device", {"FAKECUDA_DEVICES": "0"}, "vmm_posix_fd", 1,
     "--require: no usable GPU (cuInit(0) failed: CUDA_ERROR_NO_DEVICE"),
]

# The capability trials' names; --no-trials goes with the conditions only.
TRIALS = {"vmm_posix_fd"}


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    cudyn_info, driver, nvml = sys.argv[1:]
    problems = []
    for what, extra, conditions, expected, reason in SCENARIOS:
        env = dict(os.environ, CUDYN_DRIVER_PATH=driver, FAKECUDA_DEVICES="2", CUDYN_NVML_PATH=nvml)
        env.update(extra)
        trials = [] if conditions in TRIALS else ["--no-trials"]
        run = subprocess.run([cudyn_info, *trials, "--require", conditions], env=env, capture_output=True,
                             text=True, timeout=60)
        if run.returncode != expected:
            problems.append(f"{what}: exit {run.returncode}, expected {expected} ({run.stderr.strip()})")
        elif reason not in run.stderr:
            problems.append(f"{what}: stderr does not say '{reason}': {run.stderr.strip()}")
    for problem in problems:
        print(problem)
    print(f"{len(SCENARIOS)} scenario(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
