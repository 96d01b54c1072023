// cudyn — PrimaryContext: one retain of a device's primary context.
#include "cudyn/device/primary_context.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/detail/owner_context.hpp"

#include <utility>

namespace cudyn {

Result<PrimaryContext> PrimaryContext::retain(const Device& device) {
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::retain_primary(device.handle()));
    return PrimaryContext(device, std::move(context));
}

Result<PrimaryContext> PrimaryContext::activate(const Device& device) {
    auto context = retain(device);
    if (!context) return context;
    CUDYN_TRY(context->make_current());
    return context;
}

Result<void> PrimaryContext::make_current() const {
    if (retain_.empty())
        return Error::invalid_argument("make_current: the PrimaryContext is empty (moved from or released)");
    return call_driver(&DriverTable::cuCtxSetCurrent_v4000, handle());
}

}  // namespace cudyn
