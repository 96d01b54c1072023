// cudyn — who may touch mapped VMM memory, and how (cuMemSetAccess's
// CUmemAccessDesc). A fresh mapping is inaccessible to everyone until access
// is set, and unmapping forgets it: every new mapping needs its grants again.
#pragma once

#include "cudyn/core/location.hpp"

#include <cuda.h>

namespace cudyn {

enum class AccessFlags {
    None = CU_MEM_ACCESS_FLAGS_PROT_NONE,
    Read = CU_MEM_ACCESS_FLAGS_PROT_READ,
    ReadWrite = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
};

// "none", "read", "read_write"; "invalid" for any other value.
const char* to_string(AccessFlags flags) noexcept;

// One (location, flags) pair: "device 1 may read and write".
struct AccessGrant {
    Location location;
    AccessFlags flags = AccessFlags::ReadWrite;

    CUmemAccessDesc to_cu() const noexcept {
        CUmemAccessDesc descriptor{};
        descriptor.location = location.to_cu();
        descriptor.flags = static_cast<CUmemAccess_flags>(flags);
        return descriptor;
    }
};

}  // namespace cudyn
