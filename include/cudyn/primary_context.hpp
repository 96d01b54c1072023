// cudyn — the device's primary context, retained for the owner's lifetime.
#pragma once

#include "cudyn/device.hpp"
#include "cudyn/result.hpp"

#include <cuda.h>

namespace cudyn {

// Move-only owner of one retain of a device's primary context (the context the
// CUDA runtime also uses, so cudyn and runtime code share allocations).
class PrimaryContext {
public:
    static Result<PrimaryContext> retain(const Device& device);
    // retain() and make_current() in one step: what most programs want first.
    static Result<PrimaryContext> activate(const Device& device);

    PrimaryContext(PrimaryContext&& other) noexcept;
    PrimaryContext& operator=(PrimaryContext&& other) noexcept;
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;
    ~PrimaryContext();  // releases; silent if the driver is already gone

    // Binds the context to the calling thread.
    Result<void> make_current() const;
    // Releases now and reports the driver's answer; empty afterwards, or, when
    // the driver refused, still holding the retain (release() may be retried).
    Result<void> release();

    CUcontext handle() const noexcept { return context_; }
    const Device& device() const noexcept { return device_; }

private:
    PrimaryContext(Device device, CUcontext context) : device_(device), context_(context) {}
    Device device_;
    CUcontext context_ = nullptr;
};

}  // namespace cudyn
