// cudyn — which physical device a Device is: its UUID, PCI bus id and (on
// Windows) LUID. Ordinals change with CUDA_VISIBLE_DEVICES and container
// remapping; these do not, so logs, ranks and tools can agree on a GPU.
#pragma once

#include "cudyn/core/result.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cudyn {

// The 16 bytes cuDeviceGetUuid writes.
struct DeviceUuid {
    std::array<std::uint8_t, 16> bytes{};

    // nvidia-smi's spelling: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
    // lower-case hex.
    std::string to_string() const;
    // The 32 hex digits in the 8-4-4-4-12 grouping, with or without a "GPU-"
    // or "MIG-" prefix, either case. InvalidArgument naming the text otherwise.
    static Result<DeviceUuid> parse(std::string_view text);

    bool is_zero() const noexcept;
    friend bool operator==(const DeviceUuid& a, const DeviceUuid& b) noexcept { return a.bytes == b.bytes; }
    friend bool operator!=(const DeviceUuid& a, const DeviceUuid& b) noexcept { return a.bytes != b.bytes; }
    friend bool operator<(const DeviceUuid& a, const DeviceUuid& b) noexcept { return a.bytes < b.bytes; }
};

// Where a device sits on the PCI bus.
struct PciBusId {
    std::uint32_t domain = 0;
    std::uint32_t bus = 0;
    std::uint32_t device = 0;
    std::uint32_t function = 0;

    // The driver's spelling, "0000:3B:00.0" (upper-case hex; nvidia-smi writes
    // the domain with eight digits, "00000000:3B:00.0").
    std::string to_string() const;
    // "domain:bus:device.function" or "bus:device.function" (domain 0), hex
    // of any case, as the driver, nvidia-smi and lspci write it.
    // InvalidArgument naming the text otherwise.
    static Result<PciBusId> parse(std::string_view text);

    friend bool operator==(const PciBusId& a, const PciBusId& b) noexcept {
        return a.domain == b.domain && a.bus == b.bus && a.device == b.device && a.function == b.function;
    }
    friend bool operator!=(const PciBusId& a, const PciBusId& b) noexcept { return !(a == b); }
};

// A Windows adapter's locally unique identifier (cuDeviceGetLuid), which
// Direct3D and Vulkan report too, and the node mask of the device within it.
struct DeviceLuid {
    std::array<std::uint8_t, 8> bytes{};
    unsigned int node_mask = 0;
};

}  // namespace cudyn
