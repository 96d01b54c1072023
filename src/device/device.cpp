// cudyn — Device queries through the driver table.
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "device/device_facts.hpp"
#include "device/internal.hpp"

#include <string>

namespace cudyn {

Result<int> Device::count() {
    int devices = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetCount_v2000, &devices));
    return devices;
}

Result<Device> Device::get(int ordinal) {
    CUDYN_TRY_ASSIGN(const int devices, count());
    if (ordinal < 0 || ordinal >= devices) return detail::ordinal_out_of_range("Device::get", ordinal, devices);
    CUdevice handle = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGet_v2000, &handle, ordinal));
    return Device(ordinal, handle);
}

Result<std::string> Device::name() const {
    char buffer[256] = {};
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetName_v2000, buffer, static_cast<int>(sizeof buffer), handle_));
    return std::string(buffer);
}

Result<std::size_t> Device::total_memory() const {
    std::size_t bytes = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceTotalMem_v3020, &bytes, handle_));
    return bytes;
}

Result<int> Device::attribute(CUdevice_attribute attribute) const {
    int value = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &value, attribute, handle_));
    return value;
}

Result<ComputeCapability> Device::compute_capability() const {
    CUDYN_TRY_ASSIGN(const int major, attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    CUDYN_TRY_ASSIGN(const int minor, attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    return ComputeCapability{major, minor};
}

Result<bool> Device::can_access_peer(const Device& peer) const {
    constexpr detail::Operation kCanAccessPeer{"can_access_peer"};
    if (peer.ordinal_ == ordinal_)
        return kCanAccessPeer.invalid("peer must be a different device than " + std::to_string(ordinal_));
    int can_access = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceCanAccessPeer_v4000, &can_access, handle_, peer.handle_));
    return can_access != 0;
}

Result<DeviceCapabilities> probe_capabilities(const Device& device) {
    // The rows of device_capabilities.def, read and classified once per device
    // by the facts cache (device_facts.cpp).
    return detail::capabilities(device.ordinal(), device.handle());
}

namespace detail {

Error ordinal_out_of_range(const char* operation, int ordinal, int visible) {
    return Error::invalid_argument(std::string(operation) + ": device ordinal " + std::to_string(ordinal) +
                                   " is out of range: " + std::to_string(visible) + " device(s) visible");
}

}  // namespace detail

}  // namespace cudyn
