// cudyn — a CUDA device: count, lookup and the queries programs need first.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device_identity.hpp"

#include <cuda.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace cudyn {

struct ComputeCapability {
    int major = 0;
    int minor = 0;
};

class Device {
public:
    // Devices visible to this process; 0 is a valid answer. Fails only when the
    // driver is unusable.
    static Result<int> count();
    // InvalidArgument when ordinal is outside [0, count()).
    static Result<Device> get(int ordinal);

    int ordinal() const noexcept { return ordinal_; }
    CUdevice handle() const noexcept { return handle_; }

    Result<std::string> name() const;
    Result<std::size_t> total_memory() const;
    Result<int> attribute(CUdevice_attribute attribute) const;
    Result<ComputeCapability> compute_capability() const;
    // Whether this device can access memory on `peer` (a different device).
    Result<bool> can_access_peer(const Device& peer) const;

    // Which physical device this is (device_identity.hpp). uuid() is
    // cuDeviceGetUuid_v2 where the driver has it (a MIG instance's own UUID),
    // else cuDeviceGetUuid (its GPU's).
    Result<DeviceUuid> uuid() const;
    Result<PciBusId> pci_bus_id() const;
    // NotSupported off Windows (a LUID names a WDDM adapter) and where the
    // driver has none for this device (TCC mode).
    Result<DeviceLuid> luid() const;
    // The visible device with this UUID or at this PCI bus id (text as
    // PciBusId::parse reads it, resolved by cuDeviceGetByPCIBusId).
    // InvalidArgument naming the value when none matches or the text is
    // malformed (checked before the driver).
    static Result<Device> by_uuid(const DeviceUuid& uuid);
    static Result<Device> by_pci_bus_id(std::string_view bus_id);

private:
    Device(int ordinal, CUdevice handle) : ordinal_(ordinal), handle_(handle) {}
    int ordinal_ = 0;
    CUdevice handle_ = 0;
};

}  // namespace cudyn
