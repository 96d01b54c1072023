// Helpers of the inter-process suites (test_fake_ipc.cpp, test_fake_shareable.cpp,
// test_gpu_ipc.cpp): message tags and timeouts, the fake's probes without
// Catch2 (children have no session), a child's context and channel, a
// parent's side of a child it starts. POSIX only.
#pragma once

#include "catch.hpp"
#include "child_process.hpp"
#include "vmm_helpers.hpp"

#include "cudyn/fake/fakecuda_probe.h"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/device/primary_context.hpp"

#include <dirent.h>
#include <dlfcn.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cudyn_test::ipc {

inline constexpr auto kChildTimeout = std::chrono::seconds(30);
inline constexpr auto kStep = std::chrono::seconds(10);  // one exchange on the channel

// Message tags of the exchanges.
enum Tag : std::uint32_t {
    kMemDescriptor = 1,
    kEventDescriptor,
    kRecorded,
    kWaiting,
    kDone,
    kRawBytes,
};

// A fakecuda_* function of the loaded fake (null when there is none).
template <typename Function>
Function probe(const char* name) {
    void* handle = ::dlopen(cudyn::load_report().library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    return handle == nullptr ? nullptr : reinterpret_cast<Function>(::dlsym(handle, name));
}

inline long live_allocations() {
    auto function = probe<PFN_fakecuda_live_allocations>("fakecuda_live_allocations");
    return function == nullptr ? -1 : function();
}

inline void hold_events(bool on) {
    if (auto function = probe<PFN_fakecuda_hold_events>("fakecuda_hold_events")) function(on ? 1 : 0);
}

// Descriptors open in this process.
inline long open_descriptors() {
    long count = 0;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
        while (const dirent* entry = ::readdir(dir))
            if (entry->d_name[0] != '.') ++count;
        ::closedir(dir);
    }
    return count - 1;  // the directory's own descriptor
}

inline std::string describe(const cudyn::Error& error) { return error.describe(); }

// A child's check of a Result, with the error in the report.
template <typename T>
bool ok(ChildChecks& check, const cudyn::Result<T>& result, const std::string& what) {
    return check.expect(result.has_value(), what + (result.has_value() ? "" : ": " + describe(result.error())));
}

// Whether every word of [address, address + bytes) is `value` (false when the copy fails).
inline bool same_words(CUdeviceptr address, std::size_t bytes, std::uint32_t value) {
    std::vector<std::uint32_t> words(bytes / 4);
    if (!cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, words.data(), address, bytes)) return false;
    for (std::uint32_t word : words)
        if (word != value) return false;
    return true;
}

// A raw cuMemsetD32, waited for: the driver returns memsets before the device
// has done them.
inline cudyn::Result<void> set_words(CUdeviceptr address, std::size_t bytes, std::uint32_t value) {
    CUDYN_TRY(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32_v3020, address, value, bytes / 4));
    return cudyn::call_driver(&cudyn::DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY);
}

inline cudyn::Result<cudyn::PrimaryContext> child_context(int ordinal = 0) {
    auto device = cudyn::Device::get(ordinal);
    if (!device) return device.error();
    return cudyn::PrimaryContext::activate(*device);
}

// The channel end a child was started with.
inline cudyn::Result<cudyn::FdChannel> child_channel() {
    return cudyn::FdChannel::adopt(cudyn::FileDescriptor(kChildChannelFd));
}

// Runs a child role's body with what every role starts with (its checks,
// device `ordinal`'s context, the channel it was given) and checks that the
// body left nothing live in the fake. The child's exit status.
template <typename Body>
int run_role(const char* role, Body body, int ordinal = 0) {
    ChildChecks check(role);
    auto context = child_context(ordinal);
    auto channel = child_channel();
    if (!ok(check, context, "context on device " + std::to_string(ordinal)) || !ok(check, channel, "channel"))
        return 1;
    const long live = live_allocations();
    body(check, *channel);
    check.expect(live_allocations() == live, "nothing left live in the child");
    return check.exit_status();
}

template <std::size_t N>
cudyn::Result<void> send_bytes(cudyn::FdChannel& channel, Tag tag, const std::array<std::uint8_t, N>& bytes) {
    return channel.send(tag, bytes.data(), bytes.size(), -1, kStep);
}

inline cudyn::Result<void> send_tag(cudyn::FdChannel& channel, Tag tag,
                                    std::chrono::milliseconds timeout = kStep) {
    return channel.send(tag, nullptr, 0, -1, timeout);
}

// A message of `tag` parsed by Descriptor::from_bytes.
template <typename Descriptor>
cudyn::Result<Descriptor> receive_descriptor(cudyn::FdChannel& channel, Tag tag,
                                             std::chrono::milliseconds timeout = kStep) {
    auto message = channel.receive(tag, timeout);
    if (!message) return std::move(message).error();
    return Descriptor::from_bytes(message->payload.data(), message->payload.size());
}

// A parent's end of a channel to a child it started (the child's end closed here).
struct ParentSide {
    cudyn::FdChannel channel;
    ChildProcess child;
};

inline ParentSide start_child(const char* role, const std::vector<std::string>& args = {}) {
    auto ends = take(cudyn::FdChannel::pair());
    ChildProcess child = ChildProcess::spawn(role, args, ends.second.socket().get());
    REQUIRE(child.pid() > 0);
    require_ok(ends.second.close());
    return ParentSide{std::move(ends.first), std::move(child)};
}

// fakecuda_hold_events(1) for a scope; release() completes the held records early.
class HeldEvents {
public:
    HeldEvents() { hold_events(true); }
    ~HeldEvents() { release(); }
    void release() { hold_events(false); }
    HeldEvents(const HeldEvents&) = delete;
    HeldEvents& operator=(const HeldEvents&) = delete;
};

}  // namespace cudyn_test::ipc
