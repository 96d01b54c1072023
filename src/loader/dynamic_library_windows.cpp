// cudyn loader — Windows side of DynamicLibrary.
#include "loader/internal.hpp"

#include <windows.h>

#include <cstdlib>
#include <vector>

namespace cudyn::loader {

namespace {

std::wstring widen(const std::string& text) {
    if (text.empty()) return {};
    const int length = ::MultiByteToWideChar(CP_UTF8, 0, text.c_str(), -1, nullptr, 0);
    std::wstring wide(static_cast<std::size_t>(length > 0 ? length : 1), L'\0');
    ::MultiByteToWideChar(CP_UTF8, 0, text.c_str(), -1, wide.data(), length);
    wide.resize(wide.size() - 1);  // drop the terminator written by the API
    return wide;
}

std::string narrow(const std::wstring& text) {
    if (text.empty()) return {};
    const int length = ::WideCharToMultiByte(CP_UTF8, 0, text.c_str(), -1, nullptr, 0, nullptr, nullptr);
    std::string out(static_cast<std::size_t>(length > 0 ? length : 1), '\0');
    ::WideCharToMultiByte(CP_UTF8, 0, text.c_str(), -1, out.data(), length, nullptr, nullptr);
    out.resize(out.size() - 1);
    return out;
}

std::string describe_last_error() {
    const DWORD code = ::GetLastError();
    char* buffer = nullptr;
    const DWORD length = ::FormatMessageA(
        FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
        nullptr, code, 0, reinterpret_cast<char*>(&buffer), 0, nullptr);
    std::string message = length != 0 && buffer != nullptr ? std::string(buffer, length) : "LoadLibraryExW failed";
    if (buffer != nullptr) ::LocalFree(buffer);
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
    return message + " (error " + std::to_string(code) + ")";
}

}  // namespace

DynamicLibrary DynamicLibrary::open(const std::string& path, std::string& error) {
    const std::wstring wide = widen(path);
    // A bare name is searched in System32 only, never the current directory or
    // PATH, where a planted nvcuda.dll would be picked up. An absolute override
    // is loaded with its own folder searched for its dependencies.
    const DWORD flags = is_absolute_path(path) ? LOAD_WITH_ALTERED_SEARCH_PATH : LOAD_LIBRARY_SEARCH_SYSTEM32;
    HMODULE module = ::LoadLibraryExW(wide.c_str(), nullptr, flags);
    if (module == nullptr) error = describe_last_error();
    return DynamicLibrary(reinterpret_cast<void*>(module));
}

void* DynamicLibrary::symbol(const char* name) const noexcept {
    if (handle_ == nullptr) return nullptr;
    return reinterpret_cast<void*>(::GetProcAddress(static_cast<HMODULE>(handle_), name));
}

std::string DynamicLibrary::real_path() const {
    if (handle_ == nullptr) return {};
    std::vector<wchar_t> buffer(MAX_PATH);
    for (;;) {
        const DWORD length = ::GetModuleFileNameW(static_cast<HMODULE>(handle_), buffer.data(),
                                                  static_cast<DWORD>(buffer.size()));
        if (length == 0) return {};
        if (length < buffer.size()) return narrow(std::wstring(buffer.data(), length));
        buffer.resize(buffer.size() * 2);
    }
}

const char* default_driver_name() noexcept { return "nvcuda.dll"; }

bool is_absolute_path(const std::string& path) noexcept {
    // C:\... or C:/... or a UNC path \\server\share.
    if (path.size() >= 3 && path[1] == ':' && (path[2] == '\\' || path[2] == '/')) return true;
    return path.size() >= 2 && (path[0] == '\\' || path[0] == '/') && (path[1] == '\\' || path[1] == '/');
}

const char* secure_environment(const char* name) noexcept {
    // Windows has no setuid; the plain environment is the only source.
    return std::getenv(name);
}

}  // namespace cudyn::loader
