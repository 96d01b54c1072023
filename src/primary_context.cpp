// cudyn — PrimaryContext: one retain of a device's primary context.
#include "cudyn/primary_context.hpp"
#include "cudyn/driver_call.hpp"

#include <utility>

namespace cudyn {

namespace {
// cuDevicePrimaryCtxRelease_v2 (11.0+) where present, else the 7.0 form: the
// table holds both so a CUDA 10 driver still works.
Result<void> release_primary_context(CUdevice device) {
    if (has_entry(&DriverTable::cuDevicePrimaryCtxRelease_v11000))
        return call_driver(&DriverTable::cuDevicePrimaryCtxRelease_v11000, device);
    return call_driver(&DriverTable::cuDevicePrimaryCtxRelease_v7000, device);
}
}  // namespace

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
        (void)release();
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
    context_ = nullptr;
    return release_primary_context(device_.handle());
}

}  // namespace cudyn
