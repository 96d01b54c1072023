// cudyn — make_own_code_resident (loader/internal.hpp).
//
// Why: a process's first import_ipc_memory ran on a code page nothing had
// touched yet, and that one fault cost more than all of cudyn's other work in
// the call; the same holds for the first call of any module. The driver's
// first use (cuInit) is the one moment a process already waits for cudyn, so
// the pages are taken then.
#include "loader/internal.hpp"

#if defined(__linux__)
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#endif

namespace cudyn::detail {

#if defined(__linux__)
namespace {

// Linux 5.14's "populate page tables, read access"; named here because older
// C library headers lack it. An older kernel answers EINVAL.
constexpr int kPopulateRead = 22;
constexpr int kPopulateWrite = 23;

struct Segment {
    std::uintptr_t begin = 0;
    std::size_t bytes = 0;
    // The writable PT_LOAD segment (initialised data and .bss) of the same object.
    std::uintptr_t data_begin = 0;
    std::size_t data_bytes = 0;
};

// The executable PT_LOAD segment of the shared object that holds `inside`.
int find_segment(dl_phdr_info* info, std::size_t, void* data) {
    auto* found = static_cast<Segment*>(data);
    const auto inside = found->begin;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& header = info->dlpi_phdr[i];
        if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
        const std::uintptr_t begin = info->dlpi_addr + header.p_vaddr;
        if (inside < begin || inside - begin >= header.p_memsz) continue;
        // The program itself (name "") links cudyn statically: not ours.
        if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 1;
        found->bytes = header.p_memsz;
        found->begin = begin;
        for (int j = 0; j < info->dlpi_phnum; ++j) {
            const ElfW(Phdr)& data = info->dlpi_phdr[j];
            if (data.p_type != PT_LOAD || (data.p_flags & PF_W) == 0) continue;
            found->data_begin = info->dlpi_addr + data.p_vaddr;
            found->data_bytes = data.p_memsz;
        }
        return 1;
    }
    return 0;
}

}  // namespace

void make_own_code_resident() noexcept {
    Segment segment;
    segment.begin = reinterpret_cast<std::uintptr_t>(&make_own_code_resident);
    if (::dl_iterate_phdr(find_segment, &segment) == 0 || segment.bytes == 0) return;
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (page_size <= 0) return;
    const auto page = static_cast<std::uintptr_t>(page_size);
    const std::uintptr_t begin = segment.begin & ~(page - 1);
    const std::uintptr_t end = segment.begin + segment.bytes;
    // The library's own data too (the open record, the caches): their first
    // write is otherwise a page fault inside the first call that makes it.
    if (segment.data_bytes != 0) {
        const std::uintptr_t data_begin = segment.data_begin & ~(page - 1);
        (void)::madvise(reinterpret_cast<void*>(data_begin), segment.data_begin + segment.data_bytes - data_begin,
                        kPopulateWrite);
    }
    if (::madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateRead) == 0) return;
    // Before Linux 5.14: a read fault per page does the same (the kernel also
    // maps the neighbouring cached pages of each fault).
    for (std::uintptr_t at = begin; at < end; at += page) (void)*reinterpret_cast<const volatile unsigned char*>(at);
}
#else
void make_own_code_resident() noexcept {}
#endif

}  // namespace cudyn::detail
