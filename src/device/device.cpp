// cudyn — Device queries through the driver table.
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"

#include "device/device_facts.hpp"

#include <utility>

namespace cudyn {

Result<int> Device::count() {
    int devices = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetCount_v2000, &devices));
    return devices;
}

Result<Device> Device::get(int ordinal) {
    auto devices = count();
    if (!devices) return devices.error();
    if (ordinal < 0 || ordinal >= *devices)
        return Error::invalid_argument("device ordinal " + std::to_string(ordinal) + " is out of range: " +
                                       std::to_string(*devices) + " device(s) visible");
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
    auto major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    if (!major) return major.error();
    auto minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    if (!minor) return minor.error();
    return ComputeCapability{*major, *minor};
}

Result<bool> Device::can_access_peer(const Device& peer) const {
    if (peer.ordinal_ == ordinal_)
        return Error::invalid_argument("can_access_peer: peer must be a different device than " +
                                       std::to_string(ordinal_));
    int can_access = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceCanAccessPeer_v4000, &can_access, handle_, peer.handle_));
    return can_access != 0;
}

Result<DeviceCapabilities> probe_capabilities(const Device& device) {
    // The rows of device_capabilities.def, read and classified once per device
    // by the facts cache (device_facts.cpp).
    return detail::capabilities(device.ordinal(), device.handle());
}

}  // namespace cudyn
