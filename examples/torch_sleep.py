"""cudyn.torch in one cycle: a model's weights and a KV cache in tagged pools,
the GPU's memory handed back while "another job" runs, then the same model
answering the same way at the same addresses.

    PYTHONPATH=BUILD/python python3 examples/torch_sleep.py    # BUILD: a build with -Dpython=enabled

Needs PyTorch with CUDA and a GPU (exits 0 saying so otherwise).
"""

import sys


def main():
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to show")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to show")
        return 0
    import cudyn.torch as ct

    torch.manual_seed(0)
    with ct.use_tag("weights"):
        model = torch.nn.Sequential(
            torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048)
        ).cuda().half()
    with ct.use_tag("kv_cache"):
        kv_cache = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
    x = torch.randn(8, 2048, device="cuda", dtype=torch.half)
    with torch.inference_mode():
        before = model(x)

    free_awake, _ = torch.cuda.mem_get_info()
    report = ct.sleep(offload_tags=("weights",))
    free_asleep, _ = torch.cuda.mem_get_info()
    print(f"asleep: {report['bytes'] >> 20} MiB released ({report['offloaded_bytes'] >> 20} MiB kept on the host); "
          f"the device's free memory rose by {(free_asleep - free_awake) >> 20} MiB")

    other_job = torch.ones(report["bytes"] // 2, dtype=torch.uint8, device="cuda")  # uses the memory meanwhile
    del other_job
    torch.cuda.empty_cache()

    ct.wake_up()
    kv_cache.zero_()  # a tag not offloaded comes back undefined
    with torch.inference_mode():
        after = model(x)
    print("awake: same output:", torch.equal(before, after))
    for row in ct.stats():
        print(f"  {row['tag']:>9} on device {row['device']}: {row['live_bytes'] >> 20} MiB live, "
              f"peak {row['peak_bytes'] >> 20} MiB")
    return 0 if torch.equal(before, after) else 1


if __name__ == "__main__":
    sys.exit(main())
