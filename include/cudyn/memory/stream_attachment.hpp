// cudyn — attaching managed memory to a stream (cuStreamAttachMemAsync):
// which streams may use a managed allocation, for devices without
// concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
// 0), where the host may touch managed memory only while no device work that
// may use it runs.
//
//     CUDYN_TRY(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Single, stream));
//     CUDYN_TRY(stream.synchronize());
//     buffer.data()[0] = 1;  // allowed once `stream` is idle, whatever other streams run
//
// The attachment is stream work: it takes effect when the stream reaches it,
// and replaces the allocation's previous one. What it lets the host do, as
// the driver documents it, on such a device:
//   * Global: any stream on any device may use the memory; the host may touch
//     it only while no device work runs at all;
//   * Host: the program promises no device uses it; the host may touch it
//     at any time;
//   * Single: only `stream` uses it on the device; the host may touch it once
//     that stream's work is done, whatever other streams run.
// Nothing checks these promises: a kernel on another stream reading memory
// attached to a single stream reads undefined data. On devices with
// concurrent managed access the attachment changes nothing the host sees.
// A stream destroyed while memory is attached to it gives the allocation
// back its allocation-time attachment once its work is done.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/managed_buffer.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

// CUmemAttach_flags.
enum class StreamAttachment : unsigned {
    Global = CU_MEM_ATTACH_GLOBAL,  // every stream of every device
    Host = CU_MEM_ATTACH_HOST,      // no device
    Single = CU_MEM_ATTACH_SINGLE,  // the one stream it is attached on
};

namespace detail {
Result<void> attach_managed_memory(CUdeviceptr base, std::size_t bytes, StreamAttachment attachment,
                                   StreamRef stream);
}  // namespace detail

// Attaches the whole buffer (the driver changes only whole allocations) on
// `stream`. InvalidArgument for an empty buffer, for Single on the legacy
// default stream (a stand-in for every stream, which the driver refuses),
// and for an attachment that is not one of the three.
template <typename T>
Result<void> attach_to_stream(const ManagedBuffer<T>& buffer, StreamAttachment attachment, StreamRef stream) {
    return detail::attach_managed_memory(buffer.device_address(), buffer.size_bytes(), attachment, stream);
}

}  // namespace cudyn
