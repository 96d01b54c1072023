// cudyn — peer access and P2P attributes.
#include "cudyn/device/peer_access.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"

#include <string>

namespace cudyn {

namespace {

constexpr detail::Operation kAttributes{"peer_attributes"};
constexpr detail::Operation kEnable{"enable_peer_access"};
constexpr detail::Operation kDisable{"disable_peer_access"};

std::string pair(const Device& from, const Device& to) {
    return "device " + std::to_string(from.ordinal()) + " -> device " + std::to_string(to.ordinal());
}

Result<void> check_pair(const detail::Operation& operation, const PrimaryContext& from, const PrimaryContext& to) {
    if (from.handle() == nullptr) return operation.invalid("`from` is empty (moved from or released)");
    if (to.handle() == nullptr) return operation.invalid("`to` is empty (moved from or released)");
    if (from.device().ordinal() == to.device().ordinal())
        return operation.invalid("both contexts are on device " + std::to_string(from.device().ordinal()) +
                                 " (peer access is between two devices)");
    return ok();
}

Result<int> p2p_attribute(CUdevice_P2PAttribute attribute, const Device& from, const Device& to) {
    int value = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetP2PAttribute_v8000, &value, attribute, from.handle(), to.handle()));
    return value;
}

// The refusal of a pair the driver would not enable, with the reason where
// cuDeviceCanAccessPeer gives one (out of line: only the error path asks).
CUDYN_DETAIL_COLD Error enable_refused(CUresult result, const PrimaryContext& from, const PrimaryContext& to) {
    auto can = from.device().can_access_peer(to.device());
    if (can && !*can)
        return kEnable.not_supported("cuDeviceCanAccessPeer", pair(from.device(), to.device()) +
                                                                  ": cuDeviceCanAccessPeer says the first cannot "
                                                                  "reach the second's memory directly");
    Error error = Error::from_driver(result, "cuCtxEnablePeerAccess");
    if (result == CUDA_ERROR_TOO_MANY_PEERS)
        error.message = pair(from.device(), to.device()) +
                        ": the device has as many peer mappings as the driver allows (its peer limit, or its BAR1 "
                        "aperture is full); disable access to peers no longer used (" + error.message + ")";
    return kEnable.context(std::move(error));
}

}  // namespace

Result<PeerAttributes> peer_attributes(const Device& from, const Device& to) {
    if (from.ordinal() == to.ordinal())
        return kAttributes.invalid("both are device " + std::to_string(from.ordinal()) +
                                   " (P2P attributes describe two devices)");
    PeerAttributes attributes;
    CUDYN_TRY_ASSIGN(attributes.performance_rank, p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, from, to));
    CUDYN_TRY_ASSIGN(const int access, p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, from, to));
    CUDYN_TRY_ASSIGN(const int atomics, p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, from, to));
    attributes.access_supported = access != 0;
    attributes.native_atomic_supported = atomics != 0;
    // The array attribute is newer than the others: a driver that does not
    // know it answers INVALID_VALUE, which means "no" (conventions.md).
    auto arrays = p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED, from, to);
    if (arrays) {
        attributes.cuda_array_access_supported = *arrays != 0;
    } else if (arrays.error().driver_result != CUDA_ERROR_INVALID_VALUE &&
               arrays.error().driver_result != CUDA_ERROR_NOT_SUPPORTED) {
        return std::move(arrays).error();
    }
    return attributes;
}

Result<void> enable_peer_access(const PrimaryContext& from, const PrimaryContext& to) {
    CUDYN_TRY(check_pair(kEnable, from, to));
    CUDYN_TRY(detail::require_entry(&DriverTable::cuCtxEnablePeerAccess_v4000));
    // The raw answer: "already enabled" is what an idempotent enable expects
    // on every call but the first, so it is compared, not built into an
    // error; cuDeviceCanAccessPeer is asked only to explain a refusal.
    const auto enable = [&]() -> Result<void> {
        const CUresult result = detail::usable_driver()->cuCtxEnablePeerAccess_v4000(to.handle(), 0u);
        if (result == CUDA_SUCCESS || result == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return ok();
        return enable_refused(result, from, to);
    };
    // A program that enables "to be sure" before each use calls this with
    // `from` already current: that case asks the driver once and switches
    // nothing (ContextScope's general path would also build a status).
    CUcontext current = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &current));
    if (current == from.handle()) return enable();
    return detail::in_context(from.handle(), enable);
}

Result<void> disable_peer_access(const PrimaryContext& from, const PrimaryContext& to) {
    CUDYN_TRY(check_pair(kDisable, from, to));
    auto disabled = detail::in_context(from.handle(), [&]() -> Result<void> {
        auto answer = call_driver(&DriverTable::cuCtxDisablePeerAccess_v4000, to.handle());
        if (!answer && answer.error().driver_result == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) return ok();
        return answer;
    });
    if (!disabled) return kDisable.context(std::move(disabled).error());
    return ok();
}

}  // namespace cudyn
