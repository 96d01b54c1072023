// cudyn — private to the loader: opening the driver library and where its own code lives.
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

namespace cudyn::detail {

// Maps every page of the shared library's executable segment into this
// process now (Linux: madvise(MADV_POPULATE_READ), else a read of one byte
// per page), so that no later first call into a part of the library pays a
// page fault on its code. A process's first import_ipc_memory ran on a code
// page nothing had touched yet, and that one fault cost more than all of
// cudyn's other work in the call; the same fault hits the first call of any
// module. The driver's first use (cuInit, tens of milliseconds) is the one
// moment a process already waits for cudyn, so the pages are taken then.
//
// Does nothing when the library is linked statically into the program (the
// executable segment is then the program's, not cudyn's to touch), on
// systems other than Linux, or when the segment cannot be found. Never fails.
void make_own_code_resident() noexcept;

}  // namespace cudyn::detail
