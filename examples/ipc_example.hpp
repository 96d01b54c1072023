// What ipc_producer and ipc_consumer agree on: message tags, the value the
// producer writes, how long they wait for each other.
#pragma once

#include <cudyn/error.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace cudyn_example {

// Message tags on the channel (the POSIX descriptor travels under
// cudyn::kPosixFdMessageTag).
enum : std::uint32_t {
    kEventTag = 1,     // IpcEventDescriptor bytes
    kMemoryTag = 2,    // IpcMemDescriptor bytes
    kReadyTag = 3,     // the consumer has opened everything
    kRecordedTag = 4,  // the producer recorded the event; payload: the value it wrote
    kDoneTag = 5,      // the consumer's answer, as text
};

inline constexpr std::uint32_t kExampleValue = 0xCAFE0001u;
inline constexpr std::chrono::seconds kWaitForPeer{120};  // to start the other program

inline int fail(const char* what, const cudyn::Error& error) {
    std::fprintf(stderr, "%s failed: %s\n", what, error.describe().c_str());
    return 1;
}

}  // namespace cudyn_example
