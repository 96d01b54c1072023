// What ipc_producer and ipc_consumer agree on: message tags, the value the
// producer writes, how long they wait for each other, where the socket is.
#pragma once

#include "example_support.hpp"  // fail()

#include <cudyn/channel/socket_path.hpp>

#include <chrono>
#include <cstdint>
#include <string>

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

// A bare name ("cudyn-ipc") is a socket in this user's private directory,
// where no other user can reach or race for it; a path or an '@' abstract
// name is taken as given (both ends still admit only this user).
inline cudyn::Result<std::string> socket_location(const std::string& name_or_path) {
    if (name_or_path.find('/') != std::string::npos || name_or_path[0] == '@') return name_or_path;
    return cudyn::private_socket_path(name_or_path);
}

}  // namespace cudyn_example
