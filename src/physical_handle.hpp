// cudyn — the shared record of one cuMemCreate (physical_memory.cpp), owned by
// PhysicalMemory and every MappedRange of it; private to src/.
#pragma once

#include "cudyn/allocation_properties.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn::detail {

// One cuMemCreate. Released by the destructor when handle is set, i.e. when
// the last owner (PhysicalMemory or MappedRange) lets go.
struct PhysicalHandle {
    explicit PhysicalHandle(const AllocationProperties& props) : properties(props) {}
    PhysicalHandle(const PhysicalHandle&) = delete;
    PhysicalHandle& operator=(const PhysicalHandle&) = delete;
    ~PhysicalHandle();  // gives back what is left, silently
    // cuMemRelease now; on success there is nothing left to release.
    Result<void> give_back();

    CUmemGenericAllocationHandle handle = 0;
    bool created = false;
    std::size_t size = 0;
    std::size_t granularity = 0;
    AllocationProperties properties;
};

}  // namespace cudyn::detail
