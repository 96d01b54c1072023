// cudyn — PrimaryContext: one retain of a device's primary context.
#include "cudyn/device/primary_context.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"

#include <utility>

namespace cudyn {

Result<PrimaryContext> PrimaryContext::retain(const Device& device) {
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::retain_primary(device.handle()));
    return PrimaryContext(device, std::move(context));
}

Result<PrimaryContext> PrimaryContext::activate(const Device& device) {
    CUDYN_TRY_ASSIGN(auto context, retain(device));
    CUDYN_TRY(context.make_current());
    return context;
}

Result<void> PrimaryContext::make_current() const {
    constexpr detail::Operation kMakeCurrent{"make_current"};
    if (held_.empty()) return kMakeCurrent.invalid("the PrimaryContext is empty (moved from or released)");
    return call_driver(&DriverTable::cuCtxSetCurrent_v4000, handle());
}

Result<void> PrimaryContext::Held::release() { return context.release(); }

}  // namespace cudyn
