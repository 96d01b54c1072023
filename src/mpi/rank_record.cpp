// cudyn — a rank's record: its byte form (rank_record.hpp has the layout) and
// how this process fills it.
#include "cudyn/mpi/rank_record.hpp"

#include "cudyn/loader.hpp"

#include "wire_values.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <string>

namespace cudyn::mpi {

namespace {

constexpr const char kMagic[9] = "CUDYNRNK";
constexpr std::size_t kHeaderSize = cudyn::detail::kWireHeaderSize;
// Version 1's parts: the floor every record must reach, whatever its version.
constexpr std::size_t kRankPartSize = 112;
constexpr std::size_t kDeviceEntrySize = 24;
constexpr std::size_t kMaxCapabilityRows = 64;  // bits of a device entry's capability word
static_assert(device_capability_count <= kMaxCapabilityRows, "device_capabilities.def outgrew the record's u64");

using detail::FixedBytes;

Error malformed(const std::string& what) { return Error::invalid_argument("rank record: " + what); }

}  // namespace

DeviceCapabilities every_capability() noexcept {
    DeviceCapabilities all;
    for (const auto& row : device_capability_list) all.*row.field = true;
    return all;
}

std::vector<std::uint8_t> RankRecord::to_bytes() const {
    // Only the rows this record knows go in the table: a record read from an
    // older peer and written again still says "unknown" for the rest.
    std::vector<std::size_t> rows;
    for (std::size_t i = 0; i < device_capability_count; ++i)
        if (reported.*device_capability_list[i].field) rows.push_back(i);
    const std::size_t entries = std::min<std::size_t>(devices.size(), 0xffff);
    const std::size_t length = kHeaderSize + kRankPartSize + rows.size() * 4 + entries * kDeviceEntrySize;

    std::vector<std::uint8_t> bytes(length);
    cudyn::detail::WireWriter out(bytes.data());
    out.handle(detail::magic_bytes(kMagic));
    out.u16(kRankRecordVersion);
    out.u16(static_cast<std::uint16_t>(kRankPartSize));
    out.u32(static_cast<std::uint32_t>(length));

    out.u32(static_cast<std::uint32_t>(load_state));
    out.u32(static_cast<std::uint32_t>(driver_version));
    out.u32(static_cast<std::uint32_t>(std::max(visible_devices, 0)));
    out.u16(static_cast<std::uint16_t>(entries));
    out.u16(static_cast<std::uint16_t>(kDeviceEntrySize));
    out.u16(static_cast<std::uint16_t>(rows.size()));
    out.reserved(2);
    out.u32(probe_failure ? static_cast<std::uint32_t>(probe_failure->code) + 1 : 0u);
    out.u32(probe_failure ? static_cast<std::uint32_t>(probe_failure->driver_result) : 0u);
    out.reserved(4);
    out.handle(FixedBytes<16>{host.boot_id});
    FixedBytes<HostIdentity::kMaxHostNameBytes> name;
    std::memcpy(name.value.data(), host.host_name.data(), std::min(host.host_name.size(), name.value.size()));
    out.handle(name);

    for (const std::size_t row : rows) out.u32(static_cast<std::uint32_t>(device_capability_list[row].attribute));

    for (std::size_t d = 0; d < entries; ++d) {
        const DeviceReport& device = devices[d];
        std::uint64_t bits = 0;
        for (std::size_t j = 0; j < rows.size(); ++j)
            if (device.capabilities.*device_capability_list[rows[j]].field) bits |= std::uint64_t{1} << j;
        out.u32(static_cast<std::uint32_t>(device.ordinal));
        out.u32(static_cast<std::uint32_t>(device.compute.major));
        out.u32(static_cast<std::uint32_t>(device.compute.minor));
        out.reserved(4);
        out.u64(bits);
    }
    return bytes;
}

Result<RankRecord> RankRecord::from_bytes(const void* data, std::size_t size) {
    if (data == nullptr) return malformed("null data");
    if (size < kHeaderSize)
        return malformed(std::to_string(size) + " bytes is shorter than its " + std::to_string(kHeaderSize) +
                         "-byte header");
    cudyn::detail::WireReader in(data, size);
    FixedBytes<8> magic;
    in.handle(magic);
    if (std::memcmp(magic.value.data(), kMagic, 8) != 0) return malformed("wrong magic (not a CUDYNRNK record)");
    RankRecord record;
    std::uint16_t rank_size = 0;
    std::uint32_t length = 0;
    in.u16(record.version);
    in.u16(rank_size);
    in.u32(length);
    if (record.version == 0) return malformed("version 0 (versions start at 1)");
    if (length != size)
        return malformed("length field says " + std::to_string(length) + " bytes, " + std::to_string(size) +
                         " were given");
    if (rank_size < kRankPartSize)
        return malformed("rank part of " + std::to_string(rank_size) + " bytes, version 1's is " +
                         std::to_string(kRankPartSize));
    if (size < kHeaderSize + rank_size)
        return malformed(std::to_string(size) + " bytes cannot hold its " + std::to_string(rank_size) +
                         "-byte rank part");

    std::uint32_t load_state = 0, driver_version = 0, visible = 0, probe_code = 0, probe_result = 0;
    std::uint16_t entries = 0, entry_size = 0, rows = 0;
    in.u32(load_state);
    in.u32(driver_version);
    in.u32(visible);
    in.u16(entries);
    in.u16(entry_size);
    in.u16(rows);
    in.reserved(2);
    in.u32(probe_code);
    in.u32(probe_result);
    in.reserved(4);
    FixedBytes<16> boot_id;
    in.handle(boot_id);
    FixedBytes<HostIdentity::kMaxHostNameBytes> name;
    in.handle(name);
    in.reserved(rank_size - kRankPartSize);  // a newer writer's rank fields

    if (visible > static_cast<std::uint32_t>(INT_MAX)) return malformed(std::to_string(visible) + " visible devices");
    if (rows > kMaxCapabilityRows)
        return malformed(std::to_string(rows) + " capability rows, at most " + std::to_string(kMaxCapabilityRows) +
                         " fit a device entry");
    if (entries > 0 && entry_size < kDeviceEntrySize)
        return malformed("device entries of " + std::to_string(entry_size) + " bytes, version 1's are " +
                         std::to_string(kDeviceEntrySize));
    // At most 16 + 65535 + 64 * 4 + 65535 * 65535 bytes: no overflow in 64 bits.
    const std::uint64_t needed = std::uint64_t{kHeaderSize} + rank_size + std::uint64_t{rows} * 4 +
                                 std::uint64_t{entries} * entry_size;
    if (size < needed)
        return malformed(std::to_string(size) + " bytes cannot hold " + std::to_string(rows) +
                         " capability rows and " + std::to_string(entries) + " device entries of " +
                         std::to_string(entry_size) + " bytes (" + std::to_string(needed) + " bytes)");

    record.load_state = static_cast<LoadState>(load_state);
    record.driver_version = static_cast<int>(driver_version);
    record.visible_devices = static_cast<int>(visible);
    if (probe_code != 0)
        record.probe_failure = ProbeFailure{static_cast<ErrorCode>(probe_code - 1), detail::driver_result_from_wire(probe_result)};
    record.host.boot_id = boot_id.value;
    record.host.host_name.assign(reinterpret_cast<const char*>(name.value.data()),
                                 std::find(name.value.begin(), name.value.end(), 0) - name.value.begin());

    // This reader's row i is the writer's table row column_of[i], matched by
    // attribute; rows it does not find stay unreported ("unknown").
    constexpr std::size_t kAbsent = kMaxCapabilityRows;
    std::array<std::size_t, device_capability_count> column_of;
    column_of.fill(kAbsent);
    record.reported = DeviceCapabilities{};
    std::array<std::uint32_t, kMaxCapabilityRows> table{};
    for (std::size_t j = 0; j < rows; ++j) {
        in.u32(table[j]);
        for (std::size_t k = 0; k < j; ++k)
            if (table[k] == table[j])
                return malformed("attribute " + std::to_string(table[j]) + " listed twice in its capability table");
        for (std::size_t i = 0; i < device_capability_count; ++i)
            if (static_cast<std::uint32_t>(device_capability_list[i].attribute) == table[j]) {
                column_of[i] = j;
                record.reported.*device_capability_list[i].field = true;
            }
    }

    record.devices.reserve(entries);
    for (std::size_t d = 0; d < entries; ++d) {
        std::uint32_t ordinal = 0, major = 0, minor = 0;
        std::uint64_t bits = 0;
        in.u32(ordinal);
        in.u32(major);
        in.u32(minor);
        in.reserved(4);
        in.u64(bits);
        in.reserved(entry_size - kDeviceEntrySize);  // a newer writer's device fields
        if (ordinal >= visible)
            return malformed("device entry " + std::to_string(d) + " names ordinal " + std::to_string(ordinal) +
                             " of " + std::to_string(visible) + " visible devices");
        DeviceReport device;
        device.ordinal = static_cast<int>(ordinal);
        device.compute = ComputeCapability{static_cast<int>(major & INT_MAX), static_cast<int>(minor & INT_MAX)};
        for (std::size_t i = 0; i < device_capability_count; ++i)
            if (column_of[i] != kAbsent)
                device.capabilities.*device_capability_list[i].field = ((bits >> column_of[i]) & 1) != 0;
        record.devices.push_back(device);
    }
    // Bytes past `needed`: a part a newer writer appended, skipped.
    return record;
}

RankRecord probe_this_rank(const RankProbeOptions& options) {
    RankRecord record;
    record.host = this_host();
    const LoadReport& report = load_report();
    record.load_state = report.state;
    record.driver_version = report.driver_version;
    if (report.state != LoadState::Loaded) return record;

    const auto stop = [&record](const Error& error) {
        record.probe_failure = ProbeFailure{error.code, error.driver_result};
    };
    const auto count = Device::count();
    if (!count) {
        stop(count.error());
        return record;
    }
    record.visible_devices = *count;

    std::vector<int> ordinals = options.devices;
    if (ordinals.empty())
        for (int ordinal = 0; ordinal < *count; ++ordinal) ordinals.push_back(ordinal);
    std::sort(ordinals.begin(), ordinals.end());
    ordinals.erase(std::unique(ordinals.begin(), ordinals.end()), ordinals.end());

    for (const int ordinal : ordinals) {
        auto device = Device::get(ordinal);  // InvalidArgument outside [0, count)
        if (!device) {
            stop(device.error());
            break;
        }
        auto capabilities = probe_capabilities(*device);
        if (!capabilities) {
            stop(capabilities.error());
            break;
        }
        auto compute = device->compute_capability();
        if (!compute) {
            stop(compute.error());
            break;
        }
        record.devices.push_back(DeviceReport{ordinal, *compute, *capabilities});
    }
    return record;
}

}  // namespace cudyn::mpi
