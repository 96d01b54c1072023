// cudyn — the library's version: the headers' (macros, known when a program
// is compiled) and the loaded library's (library_version(), known when it
// runs). The two differ when a program runs against another libcudyn than the
// one it was built with; while the major version is 0 the SONAME carries the
// minor too (libcudyn.so.0.2), so the loader refuses an incompatible one
// (docs/guide/build-and-release.md, "Versions and the ABI").
#pragma once

// meson.build checks that these match its project version.
#define CUDYN_VERSION_MAJOR 0
#define CUDYN_VERSION_MINOR 2
#define CUDYN_VERSION_PATCH 0
#define CUDYN_VERSION_STRING "0.2.0"

namespace cudyn {

// The version of the libcudyn this process loaded, e.g. "0.2.0".
const char* library_version() noexcept;

}  // namespace cudyn
