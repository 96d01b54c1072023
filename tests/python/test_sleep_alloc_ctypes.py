"""The sleeping allocator's ctypes layer (python/cudyn/sleep_alloc.py) on the
fake driver: the built libcudyn-torch.so loaded as Python loads it, its
exports, sleep and wake at the same addresses with the bytes of offloaded
tags, refusals raised as SleepAllocError, and ``import cudyn.torch`` without
PyTorch. The fake driver's device addresses are host addresses, so the test
writes and reads allocations with ctypes.

Run by Meson (suite fake-emulated) with CUDYN_DRIVER_PATH at the fake;
argv[1] is the built package's folder (<builddir>/python), where
libcudyn-torch.so lies beside the module.
"""

import contextlib
import ctypes
import os
import sys
import types
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
        sys.modules.pop("cudyn.torch", None)  # imported afresh, whatever ran before
        import cudyn.torch as ct  # noqa: PLC0415

        self.assertNotIn("torch", sys.modules)
        self.assertTrue(callable(ct.use_tag))
        self.assertEqual(ct.pool_bytes(), 0)


def _stand_in_torch(calls):
    """The few torch.cuda names cudyn.torch uses, recording their calls: the
    pool's allocations go through the library as PyTorch's would."""
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    memory = types.ModuleType("torch.cuda.memory")

    class CUDAPluggableAllocator:
        def __init__(self, path, alloc_name, free_name):
            calls.append(("allocator", path, alloc_name, free_name))
            self._allocator = object()

        def allocator(self):
            return self._allocator

    class MemPool:
        def __init__(self, allocator):
            calls.append(("pool", allocator))

    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        calls.append(("use", pool, device))
        yield

    @contextlib.contextmanager
    def device_scope(index):
        yield

    class Device:
        def __init__(self, kind, index=None):
            self.index = index if index is not None else int(str(kind).split(":")[1])

    memory.CUDAPluggableAllocator = CUDAPluggableAllocator
    cuda.memory = memory
    cuda.MemPool = MemPool
    cuda.use_mem_pool = use_mem_pool
    cuda.device = device_scope
    cuda.current_device = lambda: 0
    torch.cuda = cuda
    torch.device = Device
    return {"torch": torch, "torch.cuda": cuda, "torch.cuda.memory": memory}


class CudynTorchStructure(unittest.TestCase):
    """cudyn.torch's own logic (pools per tag and device, the tag inside
    use_tag and back after it) with a stand-in for the torch names it uses."""

    def setUp(self):
        sa.reset()
        self.calls = []
        self.modules = _stand_in_torch(self.calls)
        self.saved = {name: sys.modules.get(name) for name in self.modules}
        sys.modules.update(self.modules)
        import cudyn.torch as ct  # noqa: PLC0415

        self.ct = ct
        ct._allocator = None
        ct._pools.clear()

    def tearDown(self):
        self.ct._allocator = None
        self.ct._pools.clear()
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        sa.reset()

    def test_use_tag_allocates_under_the_tag_and_puts_the_previous_one_back(self):
        ct = self.ct
        with ct.use_tag("weights") as pool:
            self.assertEqual(sa.get_tag(), "weights")
            address = sa.alloc(MIB)  # what PyTorch's pool asks for inside
            with ct.use_tag("kv_cache", device=1) as inner:
                self.assertEqual(sa.get_tag(), "kv_cache")
                self.assertIsNot(inner, pool)
            self.assertEqual(sa.get_tag(), "weights")
        self.assertEqual(sa.get_tag(), "default")
        with ct.use_tag("weights") as again:
            self.assertIs(again, pool)  # one pool per (tag, device)
        allocators = [call for call in self.calls if call[0] == "allocator"]
        self.assertEqual(len(allocators), 1)
        self.assertEqual(allocators[0][1:], (sa.library_path(), "cudyn_torch_alloc", "cudyn_torch_free"))
        self.assertEqual([call[2] for call in self.calls if call[0] == "use"], [0, 1, 0])
        self.assertEqual(ct.pool_bytes("weights"), 2 * MIB)
        self.assertEqual(ct.pool_bytes(["kv_cache"]), 0)
        report = ct.sleep(offload_tags=("weights",))
        self.assertEqual(report["offloaded_bytes"], 2 * MIB)
        self.assertEqual(ct.wake_up(tags="weights")["allocations"], 1)
        sa.free(address)

    def test_the_tag_comes_back_when_the_block_raises(self):
        with self.assertRaises(KeyError):
            with self.ct.use_tag("weights"):
                raise KeyError("inside")
        self.assertEqual(sa.get_tag(), "default")


if __name__ == "__main__":
    unittest.main()
