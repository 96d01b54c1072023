// cudyn — Device queries through the driver table.
#include "cudyn/device.hpp"
#include "cudyn/device_capabilities.hpp"
#include "cudyn/driver_call.hpp"
#include "cudyn/loader.hpp"

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
    CUDYN_TRY(driver_status());
    // An attribute newer than the driver is answered with CUDA_ERROR_INVALID_VALUE
    // (or NOT_SUPPORTED): that means "no", not a failure of the whole probe.
    // Any other answer (out of memory, a lost context, ...) is a failure: a
    // transient error must not read as a permanent absence.
    Result<void> failure = ok();
    const auto flag = [&device, &failure](CUdevice_attribute attribute) {
        auto value = device.attribute(attribute);
        if (value) return *value != 0;
        const CUresult why = value.error().driver_result;
        if (why != CUDA_ERROR_INVALID_VALUE && why != CUDA_ERROR_NOT_SUPPORTED && failure.has_value())
            failure = std::move(value).error();
        return false;
    };
    DeviceCapabilities caps;
    caps.virtual_memory_management = flag(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    caps.posix_fd_handles = flag(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
    caps.win32_handles = flag(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED);
    caps.win32_kmt_handles = flag(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED);
    caps.fabric_handles = flag(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);
    caps.rdma_with_vmm = flag(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
    caps.host_virtual_memory_management = flag(CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    caps.host_numa_virtual_memory_management = flag(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    caps.managed_memory = flag(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    caps.concurrent_managed_access = flag(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
    caps.can_map_host_memory = flag(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
    caps.unified_addressing = flag(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
    caps.pageable_memory_access = flag(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
    caps.host_pointer_for_registered_memory = flag(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    if (!failure) return std::move(failure).error();
    return caps;
}

}  // namespace cudyn
