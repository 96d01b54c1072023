// A child process for checkpoint tests: it holds device memory (a
// DeviceBuffer of N MiB, 1 MiB of pool memory and a GrowableBuffer of two
// granules, VMM memory the driver saves as well) with known words on device
// 0 while its parent checkpoints and restores it; then it checks every word,
// that device 0 is the GPU its parent named (by UUID), and that it can still
// allocate and copy.
//
//     cudyn_test::CheckpointTarget t(expected_uuid_of_device_0_afterwards, mib);
//     ... lock / checkpoint / restore / unlock t.pid() ...
//     CHECK(t.verified());
//
// POSIX only.
#pragma once

#include "support/catch.hpp"
#include "support/child_process.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

namespace cudyn_test {

inline bool send_byte(int fd, char byte) { return ::send(fd, &byte, 1, MSG_NOSIGNAL) == 1; }
inline char receive_byte(int fd) {
    char byte = 0;
    return ::recv(fd, &byte, 1, MSG_WAITALL) == 1 ? byte : '\0';
}

// argv: the UUID device 0 must have afterwards, the MiB to hold. 'r' once
// the words are there; on 'v' it checks, answers 'k' (or 'x') and exits.
inline int checkpoint_target_role(int argc, char** argv) {
    ChildChecks check("checkpoint-target");
    const int channel = kChildChannelFd;
    const std::size_t words = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1) * (std::size_t{1} << 18);
    auto device = cudyn::Device::get(0);
    if (!check.expect(device.has_value(), "device 0")) return check.exit_status();
    auto context = cudyn::PrimaryContext::activate(*device);
    auto stream = cudyn::Stream::create();
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(words);
    if (!check.expect(context && stream && buffer, "context, stream, device memory")) return check.exit_status();
    auto pooled = cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(std::size_t{1} << 18, *stream);
    if (!check.expect(pooled.has_value(), "pool memory")) return check.exit_status();
    auto properties = cudyn::AllocationProperties::device(0);
    auto granule = cudyn::allocation_granularity(properties);
    auto growable = granule ? cudyn::GrowableBuffer::create(properties, 2 * *granule)
                            : cudyn::Result<cudyn::GrowableBuffer>(granule.error());
    if (!check.expect(growable && growable->grow_to(2 * *granule).has_value(), "VMM memory (a GrowableBuffer)"))
        return check.exit_status();
    auto vmm_words = growable->device_span_as<std::uint32_t>();
    check.expect(vmm_words && vmm_words->fill(0x6A0B1E5u).has_value(), "VMM fill");
    std::vector<std::uint32_t> expected(words);
    std::iota(expected.begin(), expected.end(), 0x5eed0000u);
    const std::vector<std::uint32_t> pool_expected(std::size_t{1} << 18, 0xB0057EDu);
    check.expect(buffer->copy_from(cudyn::HostSpan<const std::uint32_t>(expected)).has_value(), "copy in");
    check.expect(pooled->fill(0xB0057EDu).has_value() && stream->synchronize().has_value(), "pool fill");
    send_byte(channel, 'r');
    if (!check.expect(receive_byte(channel) == 'v', "the controller's go")) return check.exit_status();
    std::vector<std::uint32_t> seen(words);
    check.expect(buffer->copy_to(cudyn::HostSpan<std::uint32_t>(seen)).has_value(), "copy out");
    check.expect(seen == expected, "every word of the device buffer came back");
    std::vector<std::uint32_t> pool_seen(pool_expected.size());
    check.expect(pooled->copy_to(cudyn::HostSpan<std::uint32_t>(pool_seen)).has_value(), "pool copy out");
    check.expect(pool_seen == pool_expected, "every word of the pool memory came back");
    std::vector<std::uint32_t> vmm_seen(vmm_words ? vmm_words->size() : 0);
    check.expect(vmm_words && vmm_words->copy_to(cudyn::HostSpan<std::uint32_t>(vmm_seen)).has_value(), "VMM copy out");
    check.expect(std::all_of(vmm_seen.begin(), vmm_seen.end(), [](std::uint32_t w) { return w == 0x6A0B1E5u; }),
                 "every word of the GrowableBuffer came back");
    auto uuid = device->uuid();
    check.expect(uuid && argc > 0 && uuid->to_string() == argv[0],
                 "device 0 is " + (uuid ? uuid->to_string() : std::string("?")) + ", expected " +
                     (argc > 0 ? argv[0] : "?"));
    // It keeps working: a fresh allocation, a device-to-device copy.
    auto again = cudyn::DeviceBuffer<std::uint32_t>::allocate(words);
    check.expect(again && again->copy_from(*buffer).has_value(), "a new allocation and a copy after the restore");
    send_byte(channel, check.exit_status() == 0 ? 'k' : 'x');
    return check.exit_status();
}
inline const ChildRole checkpoint_target_child("checkpoint-target", checkpoint_target_role);

// A socket pair in `ends`; the child's end.
inline int connected(int (&ends)[2]) {
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) == 0);
    return ends[1];
}

// The target started, holding its memory; the channel's other end.
struct CheckpointTarget {
    int ends[2] = {-1, -1};
    ChildProcess child;

    explicit CheckpointTarget(const std::string& device0_after, std::size_t mib = 1)
        : child(ChildProcess::spawn("checkpoint-target", {device0_after, std::to_string(mib)}, connected(ends))) {
        ::close(ends[1]);
        REQUIRE(child.pid() > 0);
        REQUIRE(receive_byte(ends[0]) == 'r');
    }
    CheckpointTarget(const CheckpointTarget&) = delete;
    CheckpointTarget& operator=(const CheckpointTarget&) = delete;
    ~CheckpointTarget() { ::close(ends[0]); }

    int pid() const { return static_cast<int>(child.pid()); }
    // Lets the child check; its verdict.
    bool verified() {
        if (!send_byte(ends[0], 'v')) return false;
        const bool good = receive_byte(ends[0]) == 'k';
        return child.wait(std::chrono::seconds(60)) == 0 && good;
    }
};

}  // namespace cudyn_test
