#!/usr/bin/env python3
"""What a Python call into cudyn adds over the same C++ call.

For each operation, the same cudyn C++ call is timed in a C++ loop
(cudyn._cudyn._time_native) and through the Python binding in a Python loop;
the difference per call is the binding's cost (argument conversion, the GIL
release around calls that can wait, the exception check). Also: a DLPack
hand-off copies nothing (the consumer's pointer is the buffer's address).

    PYTHONPATH=<builddir>/python python3 bench/python_overhead.py [--iterations N] [--rounds R] [--json]

Runs on any driver, the fake included (where the C++ calls are cheap and the
difference is the same binding cost). The median of R rounds is reported.
"""

import argparse
import json
import statistics
import sys
import time

import cudyn
from cudyn import _cudyn


def python_per_call(iterations, body):
    start = time.perf_counter_ns()
    for _ in range(iterations):
        body()
    return (time.perf_counter_ns() - start) / iterations


def operations():
    """Each operation's Python body, made over objects built once."""
    stream = cudyn.Stream()
    event = cudyn.Event()
    event.record()
    event.synchronize()
    small = cudyn.DeviceBuffer(64)
    host = bytearray(64)

    def allocate_free():
        cudyn.DeviceBuffer(256).close()

    return {
        "stream_query": stream.query,
        "event_query": event.query,
        "device_buffer_allocate_free": allocate_free,
        "copy_to_host_64": lambda: small.copy_to(host),
    }


def dlpack_hand_off_copies_nothing():
    """A buffer exported through DLPack and wrapped again: the same address."""
    buffer = cudyn.DeviceBuffer(1 << 20)
    span = cudyn.from_dlpack(buffer.view("float32"))
    same = span.device_address == buffer.device_address
    span.close()
    return same


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    arguments = parser.parse_args()

    cudyn.use_device(0)
    report = cudyn.load_report()
    rows = []
    for name, body in operations().items():
        body()  # warm: first-use costs stay out of the loops
        native = []
        python = []
        for _ in range(arguments.rounds):
            native.append(_cudyn._time_native(name, arguments.iterations))
            python.append(python_per_call(arguments.iterations, body))
        native_ns = statistics.median(native)
        python_ns = statistics.median(python)
        rows.append({"operation": name, "cpp_ns": round(native_ns, 1), "python_ns": round(python_ns, 1),
                     "added_ns": round(python_ns - native_ns, 1)})
    result = {"driver": report["library_path"], "driver_version": report["driver_version"],
              "device": cudyn.Device(0).name, "iterations": arguments.iterations, "rounds": arguments.rounds,
              "python": sys.version.split()[0], "dlpack_zero_copy": dlpack_hand_off_copies_nothing(),
              "rows": rows}
    if arguments.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"# {result['device']}, driver {result['driver_version']}, Python {result['python']}, "
              f"median of {arguments.rounds} rounds of {arguments.iterations} calls")
        print("| operation | C++ ns/call | Python ns/call | added ns/call |")
        print("|---|---|---|---|")
        for row in rows:
            print(f"| {row['operation']} | {row['cpp_ns']} | {row['python_ns']} | {row['added_ns']} |")
        print(f"DLPack hand-off copies nothing (same address): {result['dlpack_zero_copy']}")
    return 0 if result["dlpack_zero_copy"] else 1


if __name__ == "__main__":
    sys.exit(main())
