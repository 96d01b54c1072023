// cudyn — copies between two devices' contexts (cuMemcpyPeer / cuMemcpyPeerAsync).
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/device_span.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

namespace detail {
// All of `source` (in `source_context`) to the start of `destination` (in
// `destination_context`): the checks of a device-to-device copy, then the
// driver's peer copy. Null stream: synchronous.
Result<void> copy_peer_bytes(DeviceExtent destination, CUcontext destination_context, DeviceExtent source,
                             CUcontext source_context, const StreamRef* stream);
}  // namespace detail

// Copies all of `source`, memory of `source_context`'s device, to the start of
// `destination`, memory of `destination_context`'s device. Peer access is not
// needed: without it the driver stages the copy through the host. Before the
// driver: InvalidArgument for an empty span or context, a source that does
// not fit, or overlapping spans.
//
// Without a stream: cuMemcpyPeer with the destination's context current, then
// a wait for that context's legacy stream, so the bytes are there when it
// returns (the driver returns before the device is done). With one:
// cuMemcpyPeerAsync on it, in the stream's context when it is an owned Stream.
template <typename T>
Result<void> copy_peer(DeviceSpan<T> destination, const PrimaryContext& destination_context,
                       DeviceSpan<const T> source, const PrimaryContext& source_context) {
    static_assert(!std::is_const_v<T>, "the destination is written");
    return detail::copy_peer_bytes({destination.device_address(), destination.size(), sizeof(T)},
                                   destination_context.handle(), {source.device_address(), source.size(), sizeof(T)},
                                   source_context.handle(), nullptr);
}
template <typename T>
Result<void> copy_peer(DeviceSpan<T> destination, const PrimaryContext& destination_context,
                       DeviceSpan<const T> source, const PrimaryContext& source_context, StreamRef stream) {
    static_assert(!std::is_const_v<T>, "the destination is written");
    return detail::copy_peer_bytes({destination.device_address(), destination.size(), sizeof(T)},
                                   destination_context.handle(), {source.device_address(), source.size(), sizeof(T)},
                                   source_context.handle(), &stream);
}
// A DeviceSpan<T> source converts to DeviceSpan<const T> only explicitly in
// deduction: these take a mutable source too.
template <typename T>
Result<void> copy_peer(DeviceSpan<T> destination, const PrimaryContext& destination_context, DeviceSpan<T> source,
                       const PrimaryContext& source_context) {
    return copy_peer(destination, destination_context, DeviceSpan<const T>(source), source_context);
}
template <typename T>
Result<void> copy_peer(DeviceSpan<T> destination, const PrimaryContext& destination_context, DeviceSpan<T> source,
                       const PrimaryContext& source_context, StreamRef stream) {
    return copy_peer(destination, destination_context, DeviceSpan<const T>(source), source_context, stream);
}

}  // namespace cudyn
