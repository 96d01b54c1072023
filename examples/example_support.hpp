// What every example starts and ends with: a device whose primary context is
// current, and one way to report a failure (describe() names the driver entry
// and the CUresult, so the line is enough to tell what went wrong).
#pragma once

#include "cudyn/device/device.hpp"
#include "cudyn/core/error.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/core/result.hpp"

#include <cstdio>

namespace cudyn_example {

// Prints "<what> failed: <describe()>" on stderr; returns the exit status 1.
inline int fail(const char* what, const cudyn::Error& error) {
    std::fprintf(stderr, "%s failed: %s\n", what, error.describe().c_str());
    return 1;
}

// A feature this device lacks is not the example's failure: it says so and
// exits 0. Any other error is one (exit 1).
inline int unsupported_or_fail(const char* what, const cudyn::Error& error) {
    if (error.code != cudyn::ErrorCode::NotSupported) return fail(what, error);
    std::printf("%s: not supported here, nothing to show (%s)\n", what, error.describe().c_str());
    return 0;
}

// The device's primary context, current on this thread: every allocation and
// stream below belongs to it. Keep the returned owner alive until the end.
inline cudyn::Result<cudyn::PrimaryContext> activate_device(int ordinal = 0) {
    auto device = cudyn::Device::get(ordinal);
    if (!device) return device.error();
    return cudyn::PrimaryContext::activate(*device);
}

}  // namespace cudyn_example
