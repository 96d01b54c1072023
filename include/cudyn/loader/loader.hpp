// cudyn — choosing, opening and checking the driver.
//
// The driver is opened at first use: the first call of driver(), load_report(),
// driver_status() or any module. Linux opens libcuda.so.1 only (never the bare
// libcuda.so, which is what the toolkit's stub is called); Windows opens
// nvcuda.dll from System32 only. An override must be an absolute path: from
// LoaderOptions given before first use, else from the CUDYN_DRIVER_PATH
// environment variable (read with secure_getenv, so setuid programs ignore it).
// The library is never closed: destructors may run after main returns.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/loader/load_report.hpp"

#include <string>

namespace cudyn {

struct LoaderOptions {
    // Absolute path of the driver library to open instead of the system one.
    // Empty: use CUDYN_DRIVER_PATH if set, else the platform default.
    std::string driver_path;
};

// Sets the options for the first load. InvalidArgument if the driver was
// already loaded (the options could no longer take effect) or the path is not
// absolute.
Result<void> set_loader_options(const LoaderOptions& options);

// Loads on first use and returns what happened. The reference stays valid for
// the life of the process.
const LoadReport& load_report();

// Ok when the driver is loaded and initialised; otherwise the typed error
// every call would get: DriverNotFound, StubDriver, DriverInitFailed or
// DriverRefused, with the reason.
Result<void> driver_status();

}  // namespace cudyn
