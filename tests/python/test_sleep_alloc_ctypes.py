"""The sleeping allocator's ctypes layer (python/cudyn/sleep_alloc.py) on the
fake driver: the built libcudyn-torch.so loaded as Python loads it, its
exports, sleep and wake at the same addresses with the bytes of offloaded
tags, refusals raised as SleepAllocError, and ``import cudyn.torch`` without
PyTorch. The fake driver's device addresses are host addresses, so the test
writes and reads allocations with ctypes.

Run by Meson (suite fake-emulated) with CUDYN_DRIVER_PATH at the fake and
CUDYN_TORCH_LIBRARY at the library; argv[1] is the python/ folder.
"""

import ctypes
import os
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from cudyn import sleep_alloc as sa  # noqa: E402

MIB = 1 << 20


class SleepAllocCtypes(unittest.TestCase):
    def setUp(self):
        sa.reset()

    def tearDown(self):
        sa.reset()

    def test_sleep_and_wake_keep_addresses_and_offloaded_bytes(self):
        sa.set_tag("weights")
        weights = sa.alloc(3 * MIB)
        sa.set_tag("kv_cache")
        kv = sa.alloc(2 * MIB)
        self.assertEqual(sa.get_tag(), "kv_cache")
        ctypes.memset(weights, 0x5A, 4 * MIB)  # rounded to the 2 MiB granularity
        ctypes.memset(kv, 0x11, 2 * MIB)

        report = sa.sleep(offload_tags=("weights",))
        self.assertEqual(report["allocations"], 2)
        self.assertEqual(report["bytes"], 6 * MIB)
        self.assertEqual(report["offloaded_bytes"], 4 * MIB)
        rows = {row["tag"]: row for row in sa.stats()}
        self.assertEqual(rows["weights"]["sleeping_bytes"], 4 * MIB)
        self.assertEqual(rows["weights"]["offloaded_bytes"], 4 * MIB)
        self.assertEqual(rows["kv_cache"]["offloaded_bytes"], 0)

        with self.assertRaises(sa.SleepAllocError) as refused:
            sa.sleep()
        self.assertEqual(refused.exception.code, "invalid_argument")
        self.assertIn("already asleep", str(refused.exception))

        report = sa.wake_up("weights")
        self.assertEqual(report["allocations"], 1)
        self.assertEqual(ctypes.string_at(weights, 4 * MIB), b"\x5a" * (4 * MIB))
        with self.assertRaises(sa.SleepAllocError) as refused:
            sa.wake_up(["weights"])
        self.assertIn("already awake", str(refused.exception))
        sa.wake_up()
        ctypes.memset(kv, 0x22, 2 * MIB)  # usable again (its bytes were not kept)
        self.assertEqual(ctypes.string_at(kv, 16), b"\x22" * 16)

        sa.free(weights, 3 * MIB)
        sa.free(kv, 2 * MIB)
        rows = {row["tag"]: row for row in sa.stats()}
        self.assertEqual(rows["weights"]["live_bytes"], 0)
        self.assertEqual(rows["weights"]["peak_bytes"], 4 * MIB)

    def test_refusals_name_the_operation(self):
        with self.assertRaises(sa.SleepAllocError) as refused:
            sa.alloc(0)
        self.assertIn("cudyn_torch_alloc: size 0 is not positive", str(refused.exception))
        with self.assertRaises(sa.SleepAllocError) as refused:
            sa.free(0x1000)
        self.assertIn("SleepingAllocator::free", str(refused.exception))
        with self.assertRaises(sa.SleepAllocError) as refused:
            sa.wake_up(())
        self.assertIn("no tag named", str(refused.exception))
        with self.assertRaises(sa.SleepAllocError) as refused:
            sa.set_tag("x" * 64)
        self.assertIn("at most 63", str(refused.exception))
        with self.assertRaises(TypeError):
            sa.set_tag(b"bytes")

    def test_cache(self):
        sa.set_cache_limit(2 * MIB)
        first = sa.alloc(MIB)
        sa.free(first, MIB)
        self.assertEqual(sa.cached_bytes(), 2 * MIB)
        self.assertEqual(sa.alloc(MIB), first)
        self.assertEqual(sa.cached_bytes(), 0)

    def test_only_the_c_entry_points_are_exported(self):
        # Every name ctypes declared resolved (library() raised otherwise), and
        # libcudyn's own symbols stay inside the library.
        lib = sa.library()
        with self.assertRaises(AttributeError):
            lib.cudyn_memory_ledger_snapshot  # noqa: B018
        self.assertFalse(hasattr(lib, "_ZN5cudyn6ledger8snapshotEv"))

    def test_cudyn_torch_imports_without_torch(self):
        import cudyn.torch as ct  # noqa: PLC0415

        self.assertNotIn("torch", sys.modules)
        self.assertTrue(callable(ct.use_tag))
        self.assertEqual(ct.pool_bytes(), 0)


if __name__ == "__main__":
    unittest.main()
