// cudyn — the device's primary context, retained for the owner's lifetime.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/device/device.hpp"

#include <cuda.h>

#include <utility>

namespace cudyn {

// Move-only owner of a retain of a device's primary context (the context the
// CUDA runtime also uses, so cudyn and runtime code share allocations). The
// retain is shared with the buffers, streams and other owners created in the
// context (owner_context.hpp): they keep the context alive after this object
// is released, and while it lives they cost no retain of their own.
class PrimaryContext {
public:
    static Result<PrimaryContext> retain(const Device& device);
    // retain() and make_current() in one step: what most programs want first.
    static Result<PrimaryContext> activate(const Device& device);

    // Move-only; the destructor releases, silently if the driver is already gone.

    // Binds the context to the calling thread.
    Result<void> make_current() const;
    // Lets go of the retain now: the driver's release is made, and its answer
    // reported, when no owner in the context shares it any more (else the
    // last owner releases it). Empty afterwards, or, when the driver
    // refused, still holding the retain (release() may be retried).
    Result<void> release() { return held_.release(); }

    CUcontext handle() const noexcept { return held_->context.handle(); }
    const Device& device() const noexcept { return device_; }

private:
    struct Held {
        detail::OwnerContext context;  // shared with the owners created in the context

        bool empty() const noexcept { return context.empty(); }
        // The reference goes on success and stays on a refusal: what is held is what is left.
        Result<void> release();
    };
    PrimaryContext(Device device, detail::OwnerContext context) noexcept
        : device_(device), held_(Held{std::move(context)}) {}
    Device device_;
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
