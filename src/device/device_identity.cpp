// cudyn — device identity: UUIDs, PCI bus ids, LUIDs, and finding a device
// by them.
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_identity.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace cudyn {

namespace {

constexpr detail::Operation kParseUuid{"DeviceUuid::parse"};
constexpr detail::Operation kParseBusId{"PciBusId::parse"};
constexpr detail::Operation kByUuid{"Device::by_uuid"};
constexpr detail::Operation kByBusId{"Device::by_pci_bus_id"};

int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) noexcept {
    if (text.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i)
        if ((text[i] | 0x20) != (prefix[i] | 0x20)) return false;
    return true;
}

// A run of 1..max_digits hex digits ending at `stop` (or the text's end when
// stop is 0); false for anything else.
bool read_hex_field(std::string_view& text, char stop, std::size_t max_digits, std::uint32_t& out) noexcept {
    std::size_t digits = 0;
    std::uint32_t value = 0;
    while (digits < text.size() && text[digits] != stop) {
        const int d = hex_digit(text[digits]);
        if (d < 0 || digits == max_digits) return false;
        value = value * 16 + static_cast<std::uint32_t>(d);
        ++digits;
    }
    if (digits == 0) return false;
    if (stop != 0 && digits == text.size()) return false;  // the separator is missing
    text.remove_prefix(stop != 0 ? digits + 1 : digits);
    out = value;
    return true;
}

}  // namespace

// ---- DeviceUuid -------------------------------------------------------------------------------

std::string DeviceUuid::to_string() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text = "GPU-";
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
        text += kDigits[bytes[i] >> 4];
        text += kDigits[bytes[i] & 0xf];
    }
    return text;
}

Result<DeviceUuid> DeviceUuid::parse(std::string_view text) {
    std::string_view rest = text;
    if (starts_with_ignoring_case(rest, "GPU-") || starts_with_ignoring_case(rest, "MIG-")) rest.remove_prefix(4);
    // 8-4-4-4-12 hex digits: dashes exactly at these offsets of the 36 characters.
    DeviceUuid uuid;
    bool well_formed = rest.size() == 36;
    std::size_t byte = 0;
    for (std::size_t i = 0; well_formed && i < rest.size();) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            well_formed = rest[i] == '-';
            ++i;
            continue;
        }
        const int high = hex_digit(rest[i]);
        const int low = i + 1 < rest.size() ? hex_digit(rest[i + 1]) : -1;
        well_formed = high >= 0 && low >= 0;
        if (well_formed) uuid.bytes[byte++] = static_cast<std::uint8_t>(high * 16 + low);
        i += 2;
    }
    if (!well_formed || byte != uuid.bytes.size())
        return kParseUuid.invalid("\"" + std::string(text) +
                                  "\" is not a device UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
    return uuid;
}

bool DeviceUuid::is_zero() const noexcept {
    for (std::uint8_t b : bytes)
        if (b != 0) return false;
    return true;
}

// ---- PciBusId ---------------------------------------------------------------------------------

std::string PciBusId::to_string() const {
    char text[32];
    std::snprintf(text, sizeof text, "%04X:%02X:%02X.%X", domain, bus, device, function);
    return text;
}

Result<PciBusId> PciBusId::parse(std::string_view text) {
    PciBusId id;
    std::string_view rest = text;
    // Two colons: the domain comes first; one: domain 0.
    const bool has_domain = std::count(rest.begin(), rest.end(), ':') == 2;
    const bool well_formed = (!has_domain || read_hex_field(rest, ':', 8, id.domain)) &&
                             read_hex_field(rest, ':', 2, id.bus) && read_hex_field(rest, '.', 2, id.device) &&
                             read_hex_field(rest, 0, 1, id.function) && rest.empty() && id.device < 32 &&
                             id.function < 8;
    if (!well_formed)
        return kParseBusId.invalid("\"" + std::string(text) + "\" is not a PCI bus id (domain:bus:device.function)");
    return id;
}

// ---- Device -----------------------------------------------------------------------------------

Result<DeviceUuid> Device::uuid() const {
    CUuuid raw{};
    if (has_entry(&DriverTable::cuDeviceGetUuid_v11040)) {
        CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetUuid_v11040, &raw, handle_));
    } else {
        CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetUuid_v9020, &raw, handle_));
    }
    DeviceUuid uuid;
    std::memcpy(uuid.bytes.data(), raw.bytes, uuid.bytes.size());
    return uuid;
}

Result<PciBusId> Device::pci_bus_id() const {
    char text[64] = {};
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetPCIBusId_v4010, text, static_cast<int>(sizeof text) - 1, handle_));
    return PciBusId::parse(text);
}

Result<DeviceLuid> Device::luid() const {
#if defined(_WIN32)
    char raw[8] = {};
    DeviceLuid luid;
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetLuid_v10000, raw, &luid.node_mask, handle_));
    std::memcpy(luid.bytes.data(), raw, luid.bytes.size());
    return luid;
#else
    constexpr detail::Operation kLuid{"Device::luid"};
    return kLuid.not_supported("cuDeviceGetLuid", "a LUID names a Windows display adapter; this is not Windows");
#endif
}

Result<Device> Device::by_uuid(const DeviceUuid& uuid) {
    CUDYN_TRY_ASSIGN(const int devices, count());
    for (int ordinal = 0; ordinal < devices; ++ordinal) {
        CUDYN_TRY_ASSIGN(Device device, get(ordinal));
        CUDYN_TRY_ASSIGN(const DeviceUuid candidate, device.uuid());
        if (candidate == uuid) return device;
    }
    return kByUuid.invalid("no visible device has UUID " + uuid.to_string() + " (" + std::to_string(devices) +
                           " device(s) visible)");
}

Result<Device> Device::by_pci_bus_id(std::string_view bus_id) {
    auto parsed = PciBusId::parse(bus_id);
    if (!parsed) return kByBusId.context(std::move(parsed).error());
    const PciBusId id = *parsed;
    CUdevice handle = 0;
    const std::string canonical = id.to_string();
    auto found = call_driver(&DriverTable::cuDeviceGetByPCIBusId_v4010, &handle, canonical.c_str());
    if (!found) {
        const CUresult refused = found.error().driver_result;
        if (refused == CUDA_ERROR_INVALID_DEVICE || refused == CUDA_ERROR_INVALID_VALUE || refused == CUDA_ERROR_NOT_FOUND)
            return kByBusId.invalid("no visible device at PCI bus id " + canonical);
        return found.error();
    }
    // The driver answers a handle; the ordinal is the one cuDeviceGet maps to it.
    CUDYN_TRY_ASSIGN(const int devices, count());
    for (int ordinal = 0; ordinal < devices; ++ordinal) {
        CUDYN_TRY_ASSIGN(Device device, get(ordinal));
        if (device.handle() == handle) return device;
    }
    return kByBusId.invalid("the device at PCI bus id " + canonical + " is not among the " + std::to_string(devices) +
                            " visible");
}

}  // namespace cudyn
