// managed_prefetch — one managed allocation, half of it moved to the GPU and
// half kept on the host before either side touches it.
//
//   ./build/examples/managed_prefetch
//
// Managed memory migrates on demand, a page fault at a time. A PrefetchPlan
// moves whole ranges ahead of use instead (one batched driver call where the
// driver has it); a MigrationPolicy says where pages should stay afterwards.
// Prefetching to a device needs CONCURRENT_MANAGED_ACCESS: without it (e.g.
// Windows) the plan answers NotSupported and the example stops there.
#include "example_support.hpp"

#include "cudyn/core/location.hpp"
#include "cudyn/memory/migration_policy.hpp"
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <cstdint>
#include <cstdio>

using namespace cudyn_example;

int main() {
    constexpr std::size_t kCount = std::size_t{4} << 20;  // 16 MiB of floats
    constexpr std::size_t kHalf = kCount / 2;
    constexpr float kDeviceValue = 2.0f;
    constexpr float kHostValue = 3.0f;

    auto context = activate_device(0);
    if (!context) return fail("device 0", context.error());
    auto buffer = cudyn::ManagedBuffer<float>::allocate(kCount);
    if (!buffer) return unsupported_or_fail("ManagedBuffer::allocate", buffer.error());
    auto device_half = buffer->managed_range(0, kHalf);
    auto host_half = buffer->managed_range(kHalf, kHalf);
    if (!device_half || !host_half) return fail("managed_range", !device_half ? device_half.error() : host_half.error());

    // The host half stays in host memory even when the device reads it (the
    // device then reaches it over the bus instead of pulling pages over).
    const auto policy = cudyn::MigrationPolicy::prefer_host();
    if (auto applied = policy.apply_to(*host_half); !applied) return fail("MigrationPolicy", applied.error());

    cudyn::PrefetchPlan plan;
    if (auto added = plan.add(*device_half, cudyn::Location::device(0)); !added) return fail("plan", added.error());
    if (auto added = plan.add(*host_half, cudyn::Location::host()); !added) return fail("plan", added.error());
    auto stream = cudyn::Stream::create();  // an owned stream: the batch entry refuses the legacy NULL one
    if (!stream) return fail("Stream::create", stream.error());
    if (auto executed = plan.execute(*stream); !executed) return unsupported_or_fail("PrefetchPlan", executed.error());
    if (auto synced = stream->synchronize(); !synced) return fail("synchronize", synced.error());

    // Each side writes the half that now lives with it, no fault on either.
    auto device_side = buffer->device_span().subspan(0, kHalf);
    if (!device_side) return fail("subspan", device_side.error());
    if (auto set = device_side->fill(kDeviceValue, *stream); !set)
        return fail("fill on the device half", set.error());
    // With concurrent managed access the host may write its half while the
    // device works on the other one.
    for (std::size_t i = kHalf; i < kCount; ++i) (*buffer)[i] = kHostValue;
    if (auto synced = stream->synchronize(); !synced) return fail("synchronize", synced.error());

    // Reading the device half here migrates it back on demand: correct, just
    // not free. Both halves hold what their writer put there.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) wrong += (*buffer)[i] != (i < kHalf ? kDeviceValue : kHostValue);
    if (wrong != 0) {
        std::fprintf(stderr, "managed_prefetch: %zu of %zu floats wrong\n", wrong, kCount);
        return 1;
    }
    std::printf("managed_prefetch: %zu MiB managed at 0x%llx; policy '%s' on the second half\n",
                buffer->size_bytes() >> 20, static_cast<unsigned long long>(buffer->device_address()),
                policy.describe().c_str());
    std::printf("managed_prefetch: plan of %zu prefetches ran: %zu MiB to device 0, %zu MiB to the host\n", plan.size(),
                device_half->size_bytes() >> 20, host_half->size_bytes() >> 20);
    std::printf("managed_prefetch: device wrote %.1f to the first half, host wrote %.1f to the second: correct\n",
                static_cast<double>(kDeviceValue), static_cast<double>(kHostValue));
    return 0;
}
