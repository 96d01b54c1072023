// growable_buffer — device memory that grows in place: 2 MiB to 64 MiB at one
// address, every byte written along the way still there at the end.
//
//   ./build/examples/growable_buffer
//
// GrowableBuffer reserves the address range for the largest size up front and
// maps physical memory into it as it grows, so pointers into it stay valid
// (no alloc + copy + free, which would move them and stall on the copy). It is
// built on the virtual memory management API: NotSupported on devices and
// drivers without it.
#include "example_support.hpp"

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <vector>

using namespace cudyn_example;

int main() {
    constexpr std::size_t kMiB = std::size_t{1} << 20;
    constexpr std::size_t kCapacity = 64 * kMiB;
    constexpr std::size_t kSteps[] = {2 * kMiB, 8 * kMiB, 24 * kMiB, kCapacity};
    const auto region_word = [](std::size_t step) { return static_cast<std::uint32_t>(0xA0000000u + step); };

    auto context = activate_device(0);
    if (!context) return fail("device 0", context.error());
    // Reserving address space costs no memory: the capacity is only a ceiling.
    auto buffer = cudyn::GrowableBuffer::create(cudyn::AllocationProperties::device(0), kCapacity);
    if (!buffer) return unsupported_or_fail("GrowableBuffer::create", buffer.error());
    const CUdeviceptr base = buffer->device_address();
    std::printf("growable_buffer: reserved %zu MiB at 0x%llx, mapped %zu MiB at a time\n", buffer->capacity_bytes() / kMiB,
                static_cast<unsigned long long>(base), buffer->chunk_size_bytes() / kMiB);

    // Grow step by step; give each new region its own word so the final check
    // can tell that no step disturbed the earlier ones. Sizes are whole chunks,
    // so each region ends where size() says, not where it was asked to.
    std::size_t region_end[std::size(kSteps)] = {};
    for (std::size_t step = 0; step < std::size(kSteps); ++step) {
        const std::size_t old_size = buffer->size_bytes();
        if (auto grown = buffer->grow_to(kSteps[step]); !grown) return fail("grow_to", grown.error());
        if (buffer->device_address() != base) {
            std::fprintf(stderr, "growable_buffer: the address moved to 0x%llx\n",
                         static_cast<unsigned long long>(buffer->device_address()));
            return 1;
        }
        const std::uint32_t word = region_word(step);
        auto words = buffer->device_span_as<std::uint32_t>();  // taken anew: the buffer just grew
        if (!words) return fail("device_span", words.error());
        auto new_region = words->subspan(old_size / sizeof word, (buffer->size_bytes() - old_size) / sizeof word);
        if (!new_region) return fail("subspan", new_region.error());
        if (auto set = new_region->fill(word); !set) return fail("fill of the new region", set.error());
        region_end[step] = buffer->size_bytes();
        std::printf("growable_buffer: %2zu MiB -> %2zu MiB (%zu chunk(s)), same address; new region set to 0x%08X\n",
                    old_size / kMiB, buffer->size_bytes() / kMiB, buffer->chunk_count(), static_cast<unsigned>(word));
    }

    // One copy of the whole buffer back to the host: every region must still
    // hold the word written right after it was mapped.
    std::vector<std::uint32_t> host(buffer->size_bytes() / sizeof(std::uint32_t));
    auto words = buffer->device_span_as<std::uint32_t>();
    if (!words) return fail("device_span", words.error());
    if (auto copied = words->copy_to(host); !copied) return fail("copy_to", copied.error());
    std::size_t region_start = 0;
    for (std::size_t step = 0; step < std::size(kSteps); ++step) {
        const std::uint32_t word = region_word(step);
        for (std::size_t i = region_start / sizeof word; i < region_end[step] / sizeof word; ++i) {
            if (host[i] != word) {
                std::fprintf(stderr, "growable_buffer: byte %zu holds 0x%08X, expected 0x%08X\n", i * sizeof word,
                             static_cast<unsigned>(host[i]), static_cast<unsigned>(word));
                return 1;
            }
        }
        region_start = region_end[step];
    }
    std::printf("growable_buffer: %zu MiB copied back, all %zu regions intact; capacity %zu MiB\n",
                buffer->size_bytes() / kMiB, std::size(kSteps), buffer->capacity_bytes() / kMiB);
    return 0;
}
