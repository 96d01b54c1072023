// The promise of the library: no NEEDED libcuda* in its ELF files, so the same
// binary loads on machines without a driver. CUDYN_TEST_ELF_FILES lists the
// built files to check, ':'-separated (tests/meson.build sets it).
#include "support/catch.hpp"

#include <elf.h>

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

// DT_NEEDED entries of a 64-bit ELF file, read from its section headers.
std::vector<std::string> needed_libraries(const std::vector<char>& image) {
    std::vector<std::string> needed;
    REQUIRE(image.size() > sizeof(Elf64_Ehdr));
    Elf64_Ehdr header;
    std::memcpy(&header, image.data(), sizeof header);
    REQUIRE(std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0);
    REQUIRE(header.e_ident[EI_CLASS] == ELFCLASS64);
    const auto section = [&](std::size_t index) {
        Elf64_Shdr shdr;
        REQUIRE(header.e_shoff + (index + 1) * sizeof(Elf64_Shdr) <= image.size());
        std::memcpy(&shdr, image.data() + header.e_shoff + index * sizeof(Elf64_Shdr), sizeof shdr);
        return shdr;
    };
    for (std::size_t i = 0; i < header.e_shnum; ++i) {
        const Elf64_Shdr dynamic = section(i);
        if (dynamic.sh_type != SHT_DYNAMIC) continue;
        const Elf64_Shdr strings = section(dynamic.sh_link);
        for (std::size_t offset = 0; offset + sizeof(Elf64_Dyn) <= dynamic.sh_size; offset += sizeof(Elf64_Dyn)) {
            Elf64_Dyn entry;
            std::memcpy(&entry, image.data() + dynamic.sh_offset + offset, sizeof entry);
            if (entry.d_tag == DT_NULL) break;
            if (entry.d_tag == DT_NEEDED) needed.emplace_back(image.data() + strings.sh_offset + entry.d_un.d_val);
        }
    }
    return needed;
}

std::vector<std::string> files_to_check() {
    std::vector<std::string> files;
    const char* list = std::getenv("CUDYN_TEST_ELF_FILES");
    std::stringstream stream(list != nullptr ? list : "");
    for (std::string path; std::getline(stream, path, ':');)
        if (!path.empty()) files.push_back(path);
    return files;
}

}  // namespace

TEST_CASE("no cudyn ELF file needs libcuda", "[elf]") {
    const std::vector<std::string> files = files_to_check();
    REQUIRE_FALSE(files.empty());
    for (const std::string& path : files) {
        INFO(path);
        const std::vector<char> image = read_file(path);
        const std::vector<std::string> needed = needed_libraries(image);
        // The reader must see the real dependencies (libc at least), or the
        // absence of libcuda below would prove nothing.
        bool has_libc = false;
        for (const std::string& library : needed) {
            INFO(library);
            CHECK(library.rfind("libcuda", 0) != 0);
            CHECK(library.find("nvcuda") == std::string::npos);
            has_libc = has_libc || library.rfind("libc.so", 0) == 0;
        }
        CHECK(has_libc);
    }
}
