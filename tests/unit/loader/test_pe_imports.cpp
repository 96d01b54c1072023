// The Windows form of the library's promise (test_elf_needed.cpp on Linux): no
// cudyn DLL or EXE imports nvcuda.dll, so the same binary starts on machines
// without a driver. CUDYN_TEST_PE_FILES lists the built files, ';'-separated
// (tests/meson.build sets it).
#include "support/catch.hpp"

#include <windows.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<char> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename T>
T read_at(const std::vector<char>& image, std::size_t offset) {
    REQUIRE(offset + sizeof(T) <= image.size());
    T value;
    std::memcpy(&value, image.data() + offset, sizeof value);
    return value;
}

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// Names of the DLLs a PE32+ file imports, from its import directory.
std::vector<std::string> imported_dlls(const std::vector<char>& image) {
    const auto dos = read_at<IMAGE_DOS_HEADER>(image, 0);
    REQUIRE(dos.e_magic == IMAGE_DOS_SIGNATURE);
    const std::size_t nt_offset = static_cast<std::size_t>(dos.e_lfanew);
    const auto nt = read_at<IMAGE_NT_HEADERS64>(image, nt_offset);
    REQUIRE(nt.Signature == IMAGE_NT_SIGNATURE);
    REQUIRE(nt.OptionalHeader.Magic == IMAGE_NT_OPTIONAL_HDR64_MAGIC);

    const std::size_t sections = nt_offset + offsetof(IMAGE_NT_HEADERS64, OptionalHeader) +
                                 nt.FileHeader.SizeOfOptionalHeader;
    const auto file_offset = [&](DWORD rva) -> std::size_t {
        for (WORD i = 0; i < nt.FileHeader.NumberOfSections; ++i) {
            const auto section = read_at<IMAGE_SECTION_HEADER>(image, sections + i * sizeof(IMAGE_SECTION_HEADER));
            if (rva >= section.VirtualAddress && rva < section.VirtualAddress + section.SizeOfRawData)
                return rva - section.VirtualAddress + section.PointerToRawData;
        }
        FAIL("RVA outside every section");
        return 0;
    };

    std::vector<std::string> dlls;
    const IMAGE_DATA_DIRECTORY directory = nt.OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_IMPORT];
    if (directory.VirtualAddress == 0) return dlls;
    for (std::size_t at = file_offset(directory.VirtualAddress);; at += sizeof(IMAGE_IMPORT_DESCRIPTOR)) {
        const auto descriptor = read_at<IMAGE_IMPORT_DESCRIPTOR>(image, at);
        if (descriptor.Name == 0) break;
        const std::size_t name = file_offset(descriptor.Name);
        dlls.emplace_back(image.data() + name, strnlen(image.data() + name, image.size() - name));
    }
    return dlls;
}

std::vector<std::string> files_to_check() {
    std::vector<std::string> files;
    const char* list = std::getenv("CUDYN_TEST_PE_FILES");
    std::stringstream stream(list != nullptr ? list : "");
    for (std::string path; std::getline(stream, path, ';');)
        if (!path.empty()) files.push_back(path);
    return files;
}

}  // namespace

TEST_CASE("no cudyn PE file imports nvcuda.dll", "[pe]") {
    const std::vector<std::string> files = files_to_check();
    REQUIRE_FALSE(files.empty());
    for (const std::string& path : files) {
        INFO(path);
        const std::vector<char> image = read_file(path);
        REQUIRE_FALSE(image.empty());
        // The reader must see the real imports (kernel32 at least), or the
        // absence of nvcuda below would prove nothing.
        bool has_kernel32 = false;
        for (const std::string& dll : imported_dlls(image)) {
            INFO(dll);
            CHECK(lower(dll).find("nvcuda") == std::string::npos);
            CHECK(lower(dll).rfind("libcuda", 0) != 0);
            has_kernel32 = has_kernel32 || lower(dll) == "kernel32.dll";
        }
        CHECK(has_kernel32);
    }
}
