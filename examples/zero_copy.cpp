// zero_copy — host memory the GPU writes directly, read back with no copy.
//
//   ./build/examples/zero_copy
//
// A ZeroCopyBuffer is pinned host memory that is also mapped into the device's
// address space. The host fills it through its span; the device overwrites
// the second half through its device span (a cuMemsetD32 on the GPU, over
// the bus); the host then reads both halves where they are. Good for data
// the GPU touches once; for data it reads many times, a DeviceBuffer is faster.
#include "example_support.hpp"

#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/device/stream.hpp"

#include <cstdint>
#include <cstdio>

using namespace cudyn_example;

int main() {
    constexpr std::size_t kWords = std::size_t{1} << 16;  // 256 KiB
    constexpr std::size_t kHalf = kWords / 2;
    constexpr std::uint32_t kDeviceValue = 0xC0FFEE00u;

    auto context = activate_device(0);
    if (!context) return fail("device 0", context.error());
    // NotSupported when the device cannot map host memory, checked before
    // anything is allocated.
    auto buffer = cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(kWords);
    if (!buffer) return unsupported_or_fail("ZeroCopyBuffer::allocate", buffer.error());

    for (std::size_t i = 0; i < kWords; ++i) (*buffer)[i] = static_cast<std::uint32_t>(i);  // plain host stores

    // The device side may sit at another address than the host's: its span
    // (device_span) is the one to hand the device, and subspan counts elements.
    auto second_half = buffer->device_span().subspan(kHalf, kWords - kHalf);
    if (!second_half) return fail("subspan", second_half.error());
    auto stream = cudyn::Stream::create();
    if (!stream) return fail("Stream::create", stream.error());
    if (auto set = second_half->fill(kDeviceValue, *stream); !set)
        return fail("fill on the mapped buffer's device side", set.error());
    // The memset is stream-ordered, not host-ordered: the host waits for the
    // stream before it reads what the device wrote.
    if (auto synced = stream->synchronize(); !synced) return fail("synchronize", synced.error());

    // Straight from the host span: no copy back.
    const cudyn::HostSpan<std::uint32_t> words = buffer->span();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kWords; ++i) {
        const std::uint32_t expected = i < kHalf ? static_cast<std::uint32_t>(i) : kDeviceValue;
        if (words[i] != expected && wrong++ == 0)
            std::fprintf(stderr, "word %zu is 0x%08X, expected 0x%08X\n", i, static_cast<unsigned>(words[i]),
                         static_cast<unsigned>(expected));
    }
    if (wrong != 0) {
        std::fprintf(stderr, "zero_copy: %zu of %zu words wrong\n", wrong, kWords);
        return 1;
    }
    std::printf("zero_copy: %zu words at host %p, device 0x%llx\n", kWords, static_cast<void*>(buffer->data()),
                static_cast<unsigned long long>(buffer->device_address()));
    std::printf("zero_copy: the host wrote 0..%zu, the device overwrote words %zu..%zu with 0x%08X; "
                "the host read all %zu back in place: correct\n",
                kWords - 1, kHalf, kWords - 1, static_cast<unsigned>(kDeviceValue), kWords);
    return 0;
}
