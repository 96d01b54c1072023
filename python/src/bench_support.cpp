// cudyn._cudyn._time_native: the C++ side of bench/python_overhead.py. It runs
// the very cudyn calls the Python methods make, in a C++ loop, so that the
// difference between the two timings is what the binding adds.
#include "bindings.hpp"
#include "owner.hpp"

#include <cudyn/device/event.hpp>
#include <cudyn/device/stream.hpp>
#include <cudyn/memory/device_buffer.hpp>

#include <array>
#include <chrono>
#include <string>

namespace cudyn_python {
namespace {

template <typename Body>
double nanoseconds_per_call(long iterations, Body body) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) unwrap(body());
    const auto elapsed = std::chrono::steady_clock::now() - start;
    return std::chrono::duration<double, std::nano>(elapsed).count() / static_cast<double>(iterations);
}

double time_native(const std::string& operation, long iterations) {
    if (iterations <= 0) raise_invalid("_time_native: iterations must be positive");
    py::gil_scoped_release unlocked;
    if (operation == "stream_query") {
        const cudyn::Stream stream = unwrap(cudyn::Stream::create());
        return nanoseconds_per_call(iterations, [&] { return stream.query(); });
    }
    if (operation == "event_query") {
        cudyn::Event event = unwrap(cudyn::Event::create());
        unwrap(event.record(cudyn::StreamRef(CU_STREAM_LEGACY)));
        unwrap(event.synchronize());
        return nanoseconds_per_call(iterations, [&] { return event.query(); });
    }
    if (operation == "device_buffer_allocate_free") {
        return nanoseconds_per_call(iterations, [] {
            auto buffer = cudyn::DeviceBuffer<std::uint8_t>::allocate(256);
            if (!buffer) return cudyn::Result<void>(std::move(buffer).error());
            return buffer->free();
        });
    }
    if (operation == "copy_to_host_64") {
        const auto buffer = unwrap(cudyn::DeviceBuffer<std::uint8_t>::allocate(64));
        std::array<std::uint8_t, 64> host{};
        return nanoseconds_per_call(iterations, [&] { return buffer.copy_to(host); });
    }
    raise_invalid("_time_native: unknown operation '" + operation +
                  "' (stream_query, event_query, device_buffer_allocate_free, copy_to_host_64)");
}

}  // namespace

void bind_bench_support(py::module_& module) {
    module.def("_time_native", &time_native, py::arg("operation"), py::arg("iterations"),
               "Nanoseconds per call of a cudyn C++ call in a C++ loop (bench/python_overhead.py).");
}

}  // namespace cudyn_python
