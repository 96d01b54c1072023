"""Shared fixtures: the tests run on cudyn's fake driver (CUDYN_DRIVER_PATH,
set by the Meson test that runs them, as for the C++ fake suites)."""

import ctypes
import os
import pathlib

import pytest

import cudyn


def fake_driver_path(variant: str = "emulated") -> str:
    """The fake libcuda.so.1 of a variant, next to the one this run uses."""
    current = pathlib.Path(os.environ["CUDYN_DRIVER_PATH"])
    return str(current.parent.parent / variant / current.name)


@pytest.fixture(scope="session")
def fake():
    """The fake driver's control functions (fakecuda_probe.h), through ctypes.

    The driver is loaded first, so ctypes gets the very library cudyn uses."""
    cudyn.driver_status()
    library = ctypes.CDLL(os.environ["CUDYN_DRIVER_PATH"])
    library.fakecuda_set_fail.argtypes = [ctypes.c_char_p]
    yield library
    library.fakecuda_set_fail(b"")


@pytest.fixture(scope="session")
def context():
    """Device 0's primary context, current on the test thread."""
    return cudyn.use_device(0)


def pytest_sessionfinish(session, exitstatus):
    """A file whose every test skipped (a module skipped at collection
    included, which pytest reports as 5, nothing collected) exits 77, which
    Meson counts as skipped, not passed. A file that collected nothing and
    skipped nothing keeps pytest's 5: a failure."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus not in (0, 5):
        return
    skipped = len(reporter.stats.get("skipped", []))
    ran = sum(len(reporter.stats.get(outcome, [])) for outcome in ("passed", "failed", "error", "xfailed", "xpassed"))
    if skipped > 0 and ran == 0:
        session.exitstatus = 77
