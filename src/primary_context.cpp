// cudyn — PrimaryContext: one retain of a device's primary context.
#include "cudyn/primary_context.hpp"
#include "cudyn/driver_call.hpp"
#include "cudyn/owner_context.hpp"

#include <utility>

namespace cudyn {

Result<PrimaryContext> PrimaryContext::retain(const Device& device) {
    CUcontext context = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuDevicePrimaryCtxRetain_v7000, &context, device.handle()));
    return PrimaryContext(device, context);
}

Result<PrimaryContext> PrimaryContext::activate(const Device& device) {
    auto context = retain(device);
    if (!context) return context;
    CUDYN_TRY(context->make_current());
    return context;
}

PrimaryContext::PrimaryContext(PrimaryContext&& other) noexcept
    : device_(other.device_), context_(std::exchange(other.context_, nullptr)) {}

PrimaryContext& PrimaryContext::operator=(PrimaryContext&& other) noexcept {
    if (this != &other) {
        (void)release();  // a refusal: the retain is given up (nothing else to do with it)
        device_ = other.device_;
        context_ = std::exchange(other.context_, nullptr);
    }
    return *this;
}

PrimaryContext::~PrimaryContext() { (void)release(); }

Result<void> PrimaryContext::make_current() const {
    if (context_ == nullptr) return Error::invalid_argument("make_current: the PrimaryContext is empty (moved from or released)");
    return call_driver(&DriverTable::cuCtxSetCurrent_v4000, context_);
}

Result<void> PrimaryContext::release() {
    if (context_ == nullptr) return ok();
    // A refused release leaves the retain owned: release() may be retried.
    CUDYN_TRY(detail::release_primary_context(device_.handle()));
    context_ = nullptr;
    return ok();
}

}  // namespace cudyn
