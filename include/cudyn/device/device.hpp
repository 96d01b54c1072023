// cudyn — a CUDA device: count, lookup and the queries programs need first.
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <string>

namespace cudyn {

struct ComputeCapability {
    int major = 0;
    int minor = 0;
};

class Device {
public:
    // Devices visible to this process; 0 is a valid answer. Fails only when the
    // driver is unusable.
    static Result<int> count();
    // InvalidArgument when ordinal is outside [0, count()).
    static Result<Device> get(int ordinal);

    int ordinal() const noexcept { return ordinal_; }
    CUdevice handle() const noexcept { return handle_; }

    Result<std::string> name() const;
    Result<std::size_t> total_memory() const;
    Result<int> attribute(CUdevice_attribute attribute) const;
    Result<ComputeCapability> compute_capability() const;
    // Whether this device can access memory on `peer` (a different device).
    Result<bool> can_access_peer(const Device& peer) const;

private:
    Device(int ordinal, CUdevice handle) : ordinal_(ordinal), handle_(handle) {}
    int ordinal_ = 0;
    CUdevice handle_ = 0;
};

}  // namespace cudyn
