// cudyn loader — the only place that knows about dlopen / LoadLibrary.
#pragma once

#include <string>

namespace cudyn::loader {

// An opened shared library. Deliberately never closed:
// destructors of cudyn objects may run after main returns and still call in.
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
