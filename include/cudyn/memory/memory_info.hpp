// cudyn — what the driver knows about memory: free/total per device
// (cuMemGetInfo_v2) and the attributes of a pointer (cuPointerGetAttributes).
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/primary_context.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

struct DeviceMemoryInfo {
    int device = -1;              // ordinal the numbers are for
    std::size_t free_bytes = 0;   // what the driver could still allocate there
    std::size_t total_bytes = 0;
};

// cuMemGetInfo answers for the device of the *current* context, so the API
// says which context it uses:
// - the calling thread's current context (fails with the driver's
//   CUDA_ERROR_INVALID_CONTEXT where none is current);
Result<DeviceMemoryInfo> current_device_memory_info();
// - `context` (its device), bound for the query only: the context that was
//   current before is current again afterwards, whatever the answer.
Result<DeviceMemoryInfo> device_memory_info(const PrimaryContext& context);

enum class MemoryType {
    Unknown,  // not memory the driver tracks (e.g. ordinary pageable host memory)
    Host,     // pinned, mapped or registered host memory
    Device,   // device memory (managed memory reports Device or Unified, and is_managed)
    Array,
    Unified,
};
const char* to_string(MemoryType type) noexcept;

struct PointerAttributes {
    MemoryType memory_type = MemoryType::Unknown;
    int device_ordinal = -1;        // the device the memory belongs to; -1 when Unknown
    bool is_managed = false;        // cuMemAllocManaged memory
    CUdeviceptr range_base = 0;     // start of the allocation the pointer is in
    std::size_t range_size_bytes = 0;  // and its size
    CUdeviceptr device_address = 0;    // where the device sees this address (0: not device-accessible)
    void* host_address = nullptr;      // where the host sees it (null: not host-accessible)
    CUcontext context = nullptr;    // the context the memory was allocated in

    bool known() const noexcept { return memory_type != MemoryType::Unknown; }
};

// One cuPointerGetAttributes call. An address the driver does not track is
// not an error: its attributes say MemoryType::Unknown.
Result<PointerAttributes> pointer_attributes(CUdeviceptr address);
Result<PointerAttributes> pointer_attributes(const void* address);

}  // namespace cudyn
