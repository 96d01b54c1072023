"""import cudyn never fails for want of a driver; the load report says why."""

import os
import subprocess
import sys

import cudyn
from conftest import fake_driver_path


def run_without(driver_path: str, code: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, CUDYN_DRIVER_PATH=driver_path)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                          timeout=60)


def test_loaded_on_the_fake():
    cudyn.driver_status()
    report = cudyn.load_report()
    assert report["state"] == "loaded"
    assert report["driver_version"] == 13000
    assert report["library_path"].endswith("libcuda.so.1")
    assert report["resolved_count"] == len(report["entry_points"])
    assert all(entry["resolved_via"] == "proc_address_v2" for entry in report["entry_points"])


NO_DRIVER_PROGRAM = """
import cudyn
assert cudyn.load_report()["state"] == "{state}", cudyn.load_report()
for call in (cudyn.driver_status, lambda: cudyn.Device(0), lambda: cudyn.DeviceBuffer(16)):
    try:
        call()
    except cudyn.{error} as error:
        assert error.code is cudyn.ErrorCode.{code}, error.code
        assert isinstance(error, cudyn.Error)
    else:
        raise SystemExit("no exception")
print("ok")
"""


def test_import_without_a_driver():
    result = run_without("/nonexistent/cudyn-test/libcuda.so.1",
                         NO_DRIVER_PROGRAM.format(state="not_found", error="DriverNotFound", code="DRIVER_NOT_FOUND"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_stub_driver():
    result = run_without(fake_driver_path("stub"),
                         NO_DRIVER_PROGRAM.format(state="stub", error="StubDriver", code="STUB_DRIVER"))
    assert result.returncode == 0, result.stderr


def test_init_failure():
    result = run_without(fake_driver_path("broken"),
                         NO_DRIVER_PROGRAM.format(state="init_failed", error="DriverInitFailed",
                                                  code="DRIVER_INIT_FAILED"))
    assert result.returncode == 0, result.stderr


def test_relative_driver_path_refused():
    result = run_without("relative/libcuda.so.1",
                         NO_DRIVER_PROGRAM.format(state="refused", error="DriverRefused", code="DRIVER_REFUSED"))
    assert result.returncode == 0, result.stderr


def test_set_driver_path_after_load_is_refused():
    cudyn.driver_status()
    try:
        cudyn.set_driver_path("/some/other/libcuda.so.1")
    except cudyn.InvalidArgument as error:
        assert "load" in str(error)
    else:
        raise AssertionError("set_driver_path after the load was accepted")
