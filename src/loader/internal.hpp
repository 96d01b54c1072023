// cudyn — private to the loader: opening the driver library (one source per
// platform) and taking the library's own pages in at load time.
#pragma once

#include <string>

namespace cudyn::loader {

// ---- the driver library ------------------------------------------------------------------------

// An opened shared library. Deliberately never closed: destructors of cudyn
// objects may run after main returns and still call in.
class DynamicLibrary {
public:
    DynamicLibrary() = default;

    // Opens `path` exactly. On Linux a bare name goes through the normal
    // search (used for "libcuda.so.1"); on Windows a bare name is looked up in
    // System32 only.
    static DynamicLibrary open(const std::string& path, std::string& error);

    bool is_open() const noexcept { return handle_ != nullptr; }
    void* symbol(const char* name) const noexcept;
    // The real, absolute path of the opened file (symlinks resolved).
    std::string real_path() const;

private:
    explicit DynamicLibrary(void* handle) : handle_(handle) {}
    void* handle_ = nullptr;
};

// The platform's driver library name: "libcuda.so.1" or "nvcuda.dll".
const char* default_driver_name() noexcept;
bool is_absolute_path(const std::string& path) noexcept;
// getenv that a setuid/setgid program cannot be steered by (secure_getenv).
const char* secure_environment(const char* name) noexcept;

}  // namespace cudyn::loader

namespace cudyn::detail {

// ---- the library's own pages -------------------------------------------------------------------

// Maps every page of this shared library's executable segment, and its
// writable data, into the process now, so that no later first call into a
// part of the library pays a page fault on its code or its first write to
// its data. Called once, right after the driver's first use, which a process
// already waits for.
//
// Does nothing when the library is linked statically into the program (the
// segments are then the program's, not cudyn's to touch), on systems other
// than Linux, or when the segment cannot be found. Never fails.
void make_own_code_resident() noexcept;

}  // namespace cudyn::detail
