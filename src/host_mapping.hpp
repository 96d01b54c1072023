// cudyn — host memory the device maps, and the current context's device
// (mapped_buffer.cpp); private to src/.
#pragma once

#include "cudyn/result.hpp"

#include <cuda.h>

namespace cudyn::detail {

// The device of the calling thread's current context.
Result<CUdevice> current_context_device();
// NotSupported naming `entry` unless the current context's device has
// CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY; `what` says what needed it.
Result<void> require_host_mapping(const char* entry, const char* what);
// cuMemHostGetDevicePointer_v2 with flags 0 (the only value it takes).
Result<CUdeviceptr> mapped_device_pointer(void* host);

}  // namespace cudyn::detail
