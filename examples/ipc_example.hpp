// What ipc_producer and ipc_consumer agree on: message tags, the value the
// producer writes, how long they wait for each other.
#pragma once

#include "example_support.hpp"  // fail()

#include <chrono>
#include <cstdint>

namespace cudyn_example {

// Message tags on the channel (the POSIX descriptor travels under
// cudyn::kMemoryFdMessageTag).
enum : std::uint32_t {
    kEventTag = 1,     // IpcEventDescriptor bytes
    kMemoryTag = 2,    // IpcMemoryDescriptor bytes
    kReadyTag = 3,     // the consumer has opened everything
    kRecordedTag = 4,  // the producer recorded the event; payload: the value it wrote
    kDoneTag = 5,      // the consumer's answer, as text
};

inline constexpr std::uint32_t kExampleValue = 0xCAFE0001u;
inline constexpr std::chrono::seconds kWaitForPeer{120};  // to start the other program

}  // namespace cudyn_example
