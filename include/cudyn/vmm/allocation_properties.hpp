// cudyn — what a VMM allocation is made of (cuMemCreate's CUmemAllocationProp)
// and the granularity its sizes and offsets must respect. The granularity
// depends on the exact properties (location, handle types, flags), so the
// query and the creation take the same object.
#pragma once

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <string>

namespace cudyn {

// The shareable handle types an allocation may be exported as
// (CUmemAllocationHandleType); a bitmask: combine with |.
enum class HandleType : unsigned {
    None = CU_MEM_HANDLE_TYPE_NONE,
    PosixFileDescriptor = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    Win32 = CU_MEM_HANDLE_TYPE_WIN32,
    Win32Kmt = CU_MEM_HANDLE_TYPE_WIN32_KMT,
    Fabric = CU_MEM_HANDLE_TYPE_FABRIC,
};

constexpr HandleType operator|(HandleType a, HandleType b) noexcept {
    return static_cast<HandleType>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr HandleType operator&(HandleType a, HandleType b) noexcept {
    return static_cast<HandleType>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}
// True when every bit of `wanted` is in `set`.
constexpr bool includes(HandleType set, HandleType wanted) noexcept { return (set & wanted) == wanted; }

// "posix_fd|fabric", "none".
std::string to_string(HandleType types);

// Which granularity cuMemGetAllocationGranularity reports: the minimum every
// size and offset must be a multiple of, or the one recommended for speed.
enum class Granularity { Minimum, Recommended };

// A value type: each with_* returns a modified copy, so one object can be
// kept and reused for every query and creation.
class AllocationProperties {
public:
    explicit AllocationProperties(Location location) noexcept : location_(location) {}
    static AllocationProperties device(int ordinal) noexcept { return AllocationProperties(Location::device(ordinal)); }
    // Host memory that devices map (HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    // CUDA 12.x+): not shareable, so no handle types; the driver places it on
    // a node (its properties may read back as a host NUMA node).
    static AllocationProperties host() noexcept { return AllocationProperties(Location::host()); }
    // Host memory on NUMA node `node` (HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    // CUDA 12.x+); shareable as a POSIX descriptor. A node the machine does not
    // have is the driver's CUDA_ERROR_INVALID_VALUE at creation (the granularity
    // query still answers for it).
    static AllocationProperties host_numa(int node) noexcept { return AllocationProperties(Location::host_numa(node)); }

    AllocationProperties with_location(Location location) const noexcept;
    AllocationProperties with_handle_types(HandleType types) const noexcept;
    // allocFlags.gpuDirectRDMACapable: the device must report
    // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED.
    AllocationProperties with_gpu_direct_rdma(bool capable = true) const noexcept;

    const Location& location() const noexcept { return location_; }
    HandleType handle_types() const noexcept { return handle_types_; }
    bool gpu_direct_rdma() const noexcept { return gpu_direct_rdma_; }

    // Checks what can be checked without the driver: InvalidArgument naming
    // the field (negative id, host-NUMA-current, unknown handle-type bits,
    // handle types on plain host memory, which the driver refuses).
    Result<void> validate() const;
    // Asks the driver whether it can serve these properties: NotSupported when
    // the loaded driver lacks cuMemCreate (naming it), when the device reports
    // no VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, when a requested handle type or
    // RDMA is not supported there, or when host (NUMA) VMM is not supported.
    // InvalidArgument for a device ordinal out of range. Host locations are
    // judged by the attributes of the current context's device (device 0 when
    // no context is current). The attributes are the device's cached
    // capabilities (probe_capabilities): read from the driver once per device.
    Result<void> check_supported() const;

    // The driver's structure: type PINNED, the location with type and id set.
    CUmemAllocationProp to_cu() const noexcept;

    // "device 0, handles posix_fd, RDMA".
    std::string describe() const;

private:
    Location location_;
    HandleType handle_types_ = HandleType::None;
    bool gpu_direct_rdma_ = false;
};

// cuMemGetAllocationGranularity for exactly these properties, after
// validate() and check_supported() (which asks the driver for no attribute
// after the first call for a device).
Result<std::size_t> allocation_granularity(const AllocationProperties& properties,
                                           Granularity which = Granularity::Minimum);

}  // namespace cudyn
