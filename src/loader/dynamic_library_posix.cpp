// cudyn loader — POSIX side of DynamicLibrary.
#include "loader/internal.hpp"

#include <dlfcn.h>
#include <link.h>
#include <climits>
#include <cstdlib>

namespace cudyn::loader {

DynamicLibrary DynamicLibrary::open(const std::string& path, std::string& error) {
    // RTLD_LOCAL: the driver's symbols must not satisfy other libraries'
    // undefined cu* references by accident.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* reason = ::dlerror();
        error = reason != nullptr ? reason : "dlopen failed";
    }
    return DynamicLibrary(handle);
}

void* DynamicLibrary::symbol(const char* name) const noexcept {
    return handle_ != nullptr ? ::dlsym(handle_, name) : nullptr;
}

std::string DynamicLibrary::real_path() const {
    if (handle_ == nullptr) return {};
    struct link_map* map = nullptr;
    if (::dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr)
        return {};
    char resolved[PATH_MAX];
    if (::realpath(map->l_name, resolved) != nullptr) return resolved;
    return map->l_name;
}

const char* default_driver_name() noexcept { return "libcuda.so.1"; }

bool is_absolute_path(const std::string& path) noexcept { return !path.empty() && path[0] == '/'; }

const char* secure_environment(const char* name) noexcept { return ::secure_getenv(name); }

}  // namespace cudyn::loader
