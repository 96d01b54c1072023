// cudyn — what a device can do for the memory modules, probed from attributes.
#pragma once

#include "cudyn/device.hpp"

namespace cudyn {

struct DeviceCapabilities {
    bool virtual_memory_management = false;   // cuMemCreate/cuMemMap family
    bool posix_fd_handles = false;            // VMM shareable handles as file descriptors
    bool win32_handles = false;
    bool win32_kmt_handles = false;
    bool fabric_handles = false;              // VMM handles across nodes (IMEX)
    bool rdma_with_vmm = false;               // GPUDirect RDMA on VMM allocations
    bool host_virtual_memory_management = false;       // cuMemCreate on CU_MEM_LOCATION_TYPE_HOST (12.x+)
    bool host_numa_virtual_memory_management = false;  // cuMemCreate on a host NUMA node (12.x+)
    bool managed_memory = false;
    bool concurrent_managed_access = false;   // needed to prefetch to / advise for the device
    bool can_map_host_memory = false;         // zero-copy mapped host buffers
    bool unified_addressing = false;
    bool pageable_memory_access = false;
    bool host_pointer_for_registered_memory = false;  // registered memory keeps its address on device
};

// Reads every attribute above. An attribute the driver does not know (an old
// driver answers CUDA_ERROR_INVALID_VALUE) counts as "no".
Result<DeviceCapabilities> probe_capabilities(const Device& device);

}  // namespace cudyn
