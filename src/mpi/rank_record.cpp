// cudyn — a rank's record: its byte form and how this process fills it.
//
// Ranks of one job may run different cudyn versions (a node image updated
// before another), so the bytes are made to be read by older and newer
// peers alike. Fields are only ever appended, and each part says how long it
// is, so a reader takes the fields it knows and skips the rest:
//
//   header (16 bytes)
//     magic[8]  "CUDYNRNK"
//     u16       version: the writer's layout revision (1). Every append raises
//               it; a reader never refuses a newer one, only an incompatible
//               layout would take a new magic
//     u16       rank part size in bytes (version 1: 112)
//     u32       length of the whole record in bytes
//   rank part
//     u32 load state (LoadState's value)        u32 driver version (0: unknown)
//     u32 visible devices (cuDeviceGetCount)    u16 device entries   u16 device entry size (version 1: 24)
//     u16 capability rows                       u16 reserved
//     u32 probe error (ErrorCode's value + 1; 0: the probe completed)
//     u32 probe CUresult                        u32 reserved
//     u8[16] boot id                            u8[64] host name, zero-padded
//   capability table: one u32 CUdevice_attribute per capability row the
//     writer knew, in the order of its device_capabilities.def
//   device entries, each of the stated size
//     u32 ordinal   u32 compute capability major   u32 minor   u32 reserved
//     u64 capability bits: bit i = "yes" for row i of the table above
//     from version 3 (entry size 80):
//     u32 identity flags: bit 0 the UUID is reported, bit 1 the PCI bus id,
//         bit 2 the fabric domain, bit 3 that fabric is healthy
//     u8[16] UUID (cuDeviceGetUuid's bytes)
//     u32 PCI domain   u32 bus   u32 device   u32 function
//     u8[16] fabric cluster UUID               u32 fabric clique id   u32 reserved
//   fingerprint part (from version 2; a version-1 record ends before it)
//     u32 part size in bytes, this field included
//     u16 trial names                          u16 fingerprint entry size (version 2: 12 + trial names)
//     trial names: each a u8 length (1..255) and that many bytes, the
//       capability_trials.def field name ("vmm_posix_fd"; never renamed)
//     fingerprint entries, one per device entry and in its order, each of the stated size
//       u32 state: 0 no trials run, 1 the trials ran, ErrorCode's value + 2
//           when fingerprint_device failed (its trials then read Skipped)
//       u32 that failure's CUresult            u32 newest PTX ISA (major * 10 + minor; 0: none)
//       u8 per trial name, in the names' order: TrialOutcome's value, 0xff
//           for a trial not reported
//   (a later version may add a part after the last one; readers skip it)
//
// Capabilities are matched between versions by their CUdevice_attribute, not
// by position: device_capabilities.def may gain a row anywhere, and a row the
// writer did not know reads "unknown" (RankRecord::reported), not "no".
//
// Trials of a capability fingerprint are matched by name for the same
// reason: a trial the writer did not run, or whose name this reader does not
// know, reads "unknown" (nullopt), not "does not work".
//
// Adding a field: append it to the rank part, the device entry, the
// fingerprint entry or as a new part at the end, raise kRankRecordVersion,
// read it only where the stated size covers it, and give older records a
// value that means "not reported".
#include "cudyn/mpi/rank_record.hpp"

#include "cudyn/loader/loader.hpp"
#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvml_library.hpp"

#include "wire_values.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

namespace cudyn::mpi {

namespace {

constexpr const char kMagic[9] = "CUDYNRNK";
constexpr std::size_t kHeaderSize = cudyn::detail::kWireHeaderSize;
// Version 1's parts: the floor every record must reach, whatever its version.
constexpr std::size_t kRankPartSize = 112;
constexpr std::size_t kDeviceEntrySize = 24;
// Version 3's device entry: version 1's, then the identity fields.
constexpr std::size_t kDeviceEntryWithIdentity = 80;
constexpr std::uint32_t kUuidReported = 1, kBusIdReported = 2, kFabricReported = 4, kFabricHealthy = 8;
constexpr std::size_t kMaxCapabilityRows = 64;  // bits of a device entry's capability word
static_assert(device_capability_count <= kMaxCapabilityRows, "device_capabilities.def outgrew the record's u64");

// Version 2's fingerprint part: its header, and the fixed fields of an entry
// before the outcome bytes.
constexpr std::size_t kFingerprintHeaderSize = 8;
constexpr std::size_t kFingerprintEntryFixed = 12;
constexpr std::uint8_t kTrialNotReported = 0xff;
constexpr std::uint32_t kNoTrials = 0, kTrialsRan = 1, kFingerprintFailedBase = 2;

using detail::FixedBytes;

Error malformed(const std::string& what) { return Error::invalid_argument("rank record: " + what); }

std::uint8_t outcome_to_wire(const std::optional<TrialOutcome>& outcome) noexcept {
    return outcome ? static_cast<std::uint8_t>(*outcome) : kTrialNotReported;
}

// An outcome a newer writer added is not "works": it reads Failed, the
// outcome that says the trial could not tell.
std::optional<TrialOutcome> outcome_from_wire(std::uint8_t value) noexcept {
    if (value == kTrialNotReported) return std::nullopt;
    return value <= static_cast<std::uint8_t>(TrialOutcome::TimedOut) ? static_cast<TrialOutcome>(value)
                                                                     : TrialOutcome::Failed;
}

// Reads the fingerprint part at the front of `part` (`available` bytes, the
// rest of the record) into `devices`; returns the part's size.
Result<std::size_t> read_fingerprints(const std::uint8_t* part, std::size_t available,
                                      std::vector<DeviceReport>& devices) {
    if (available < kFingerprintHeaderSize)
        return malformed(std::to_string(available) + " bytes after the device entries cannot hold a fingerprint part (" +
                         std::to_string(kFingerprintHeaderSize) + "-byte header)");
    cudyn::detail::WireReader in(part, available);
    std::uint32_t part_size = 0;
    std::uint16_t names = 0, entry_size = 0;
    in.u32(part_size);
    in.u16(names);
    in.u16(entry_size);
    if (part_size < kFingerprintHeaderSize || part_size > available)
        return malformed("fingerprint part of " + std::to_string(part_size) + " bytes, " + std::to_string(available) +
                         " bytes are left and its header takes " + std::to_string(kFingerprintHeaderSize));
    if (entry_size < kFingerprintEntryFixed + names)
        return malformed("fingerprint entries of " + std::to_string(entry_size) + " bytes cannot hold " +
                         std::to_string(names) + " trial outcomes");

    // column_of[i]: the writer's column of this reader's trial i.
    constexpr std::size_t kAbsent = SIZE_MAX;
    std::array<std::size_t, capability_trial_count> column_of;
    column_of.fill(kAbsent);
    std::size_t at = kFingerprintHeaderSize;
    std::vector<std::string> seen;
    for (std::size_t j = 0; j < names; ++j) {
        const std::size_t length = at < part_size ? part[at] : 0;
        if (at >= part_size || length == 0 || length > part_size - at - 1)
            return malformed("trial name " + std::to_string(j) + " is empty or runs past its " +
                             std::to_string(part_size) + "-byte fingerprint part");
        std::string name(reinterpret_cast<const char*>(part + at + 1), length);
        at += 1 + length;
        if (std::find(seen.begin(), seen.end(), name) != seen.end())
            return malformed("trial \"" + name + "\" named twice in its fingerprint part");
        for (std::size_t i = 0; i < capability_trial_count; ++i)
            if (name == capability_trial_list[i].name) column_of[i] = j;
        seen.push_back(std::move(name));
    }
    // At most 65535 entries of 65535 bytes: no overflow in 64 bits.
    const std::uint64_t entries_size = std::uint64_t{devices.size()} * entry_size;
    if (part_size - at < entries_size)
        return malformed("fingerprint part of " + std::to_string(part_size) + " bytes cannot hold " +
                         std::to_string(devices.size()) + " entries of " + std::to_string(entry_size) + " bytes");

    for (DeviceReport& device : devices) {
        const std::uint8_t* entry = part + at;
        at += entry_size;
        cudyn::detail::WireReader fields(entry, entry_size);
        std::uint32_t state = 0, result = 0, ptx = 0;
        fields.u32(state);
        fields.u32(result);
        fields.u32(ptx);
        if (state == kNoTrials) continue;
        if (ptx > static_cast<std::uint32_t>(INT_MAX))
            return malformed("a fingerprint names PTX ISA " + std::to_string(ptx) + ", more than an int holds");
        DeviceFingerprint print;
        print.newest_ptx_isa = static_cast<int>(ptx);
        if (state >= kFingerprintFailedBase) {
            ErrorCode code = ErrorCode::Driver;
            if (!detail::error_code_from_wire(state - kFingerprintFailedBase, code))
                return malformed("a fingerprint failed with error code " + std::to_string(state - kFingerprintFailedBase) +
                                 ", more than an int holds");
            print.failure = ProbeFailure{code, detail::driver_result_from_wire(result)};
        }
        for (std::size_t i = 0; i < capability_trial_count; ++i)
            if (column_of[i] != kAbsent) print.trials[i] = outcome_from_wire(entry[kFingerprintEntryFixed + column_of[i]]);
        device.fingerprint = print;
    }
    // Bytes past the entries: a newer writer's fields of this part, skipped.
    return std::size_t{part_size};
}

std::vector<std::uint8_t> fingerprint_part(const std::vector<DeviceReport>& devices, std::size_t entries) {
    std::size_t names_size = 0;
    for (const auto& trial : capability_trial_list) names_size += 1 + std::strlen(trial.name);
    const std::size_t entry_size = kFingerprintEntryFixed + capability_trial_count;
    std::vector<std::uint8_t> part(kFingerprintHeaderSize + names_size + entries * entry_size);
    cudyn::detail::WireWriter out(part.data());
    out.u32(static_cast<std::uint32_t>(part.size()));
    out.u16(static_cast<std::uint16_t>(capability_trial_count));
    out.u16(static_cast<std::uint16_t>(entry_size));
    std::size_t at = kFingerprintHeaderSize;
    for (const auto& trial : capability_trial_list) {
        const std::size_t length = std::strlen(trial.name);
        part[at] = static_cast<std::uint8_t>(length);
        std::memcpy(part.data() + at + 1, trial.name, length);
        at += 1 + length;
    }
    for (std::size_t d = 0; d < entries; ++d, at += entry_size) {
        const std::optional<DeviceFingerprint>& print = devices[d].fingerprint;
        cudyn::detail::WireWriter fields(part.data() + at);
        std::uint32_t state = kNoTrials;
        if (print) state = print->failure ? static_cast<std::uint32_t>(print->failure->code) + kFingerprintFailedBase : kTrialsRan;
        fields.u32(state);
        fields.u32(print && print->failure ? static_cast<std::uint32_t>(print->failure->driver_result) : 0u);
        fields.u32(print ? static_cast<std::uint32_t>(std::max(print->newest_ptx_isa, 0)) : 0u);
        for (std::size_t i = 0; i < capability_trial_count; ++i)
            part[at + kFingerprintEntryFixed + i] = print ? outcome_to_wire(print->trials[i]) : kTrialNotReported;
    }
    return part;
}

}  // namespace

DeviceFingerprint DeviceFingerprint::of(const CapabilityFingerprint& fingerprint) {
    DeviceFingerprint print;
    for (std::size_t i = 0; i < capability_trial_count; ++i)
        print.trials[i] = (fingerprint.*capability_trial_list[i].field).outcome;
    print.newest_ptx_isa = fingerprint.newest_ptx_isa;
    return print;
}

std::optional<TrialOutcome> DeviceFingerprint::outcome(const char* trial) const noexcept {
    if (trial == nullptr) return std::nullopt;
    for (std::size_t i = 0; i < capability_trial_count; ++i)
        if (std::strcmp(capability_trial_list[i].name, trial) == 0) return trials[i];
    return std::nullopt;
}

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
    const std::vector<std::uint8_t> fingerprints = fingerprint_part(devices, entries);
    const std::size_t length =
        kHeaderSize + kRankPartSize + rows.size() * 4 + entries * kDeviceEntryWithIdentity + fingerprints.size();

    std::vector<std::uint8_t> bytes(length);
    cudyn::detail::WireWriter out(bytes.data());
    out.fixed(detail::magic_bytes(kMagic));
    out.u16(kRankRecordVersion);
    out.u16(static_cast<std::uint16_t>(kRankPartSize));
    out.u32(static_cast<std::uint32_t>(length));

    out.u32(static_cast<std::uint32_t>(load_state));
    out.u32(static_cast<std::uint32_t>(driver_version));
    out.u32(static_cast<std::uint32_t>(std::max(visible_devices, 0)));
    out.u16(static_cast<std::uint16_t>(entries));
    out.u16(static_cast<std::uint16_t>(kDeviceEntryWithIdentity));
    out.u16(static_cast<std::uint16_t>(rows.size()));
    out.reserved(2);
    out.u32(probe_failure ? static_cast<std::uint32_t>(probe_failure->code) + 1 : 0u);
    out.u32(probe_failure ? static_cast<std::uint32_t>(probe_failure->driver_result) : 0u);
    out.reserved(4);
    out.fixed(FixedBytes<16>{host.boot_id});
    FixedBytes<HostIdentity::kMaxHostNameBytes> name;
    std::memcpy(name.value.data(), host.host_name.data(), std::min(host.host_name.size(), name.value.size()));
    out.fixed(name);

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
        const FabricDomain fabric = device.fabric.value_or(FabricDomain{});
        out.u32((device.uuid ? kUuidReported : 0u) | (device.pci_bus_id ? kBusIdReported : 0u) |
                (device.fabric ? kFabricReported : 0u) | (fabric.healthy ? kFabricHealthy : 0u));
        out.fixed(FixedBytes<16>{device.uuid.value_or(DeviceUuid{}).bytes});
        const PciBusId bus = device.pci_bus_id.value_or(PciBusId{});
        out.u32(bus.domain);
        out.u32(bus.bus);
        out.u32(bus.device);
        out.u32(bus.function);
        out.fixed(FixedBytes<16>{fabric.cluster_uuid.bytes});
        out.u32(fabric.clique_id);
        out.reserved(4);
    }
    std::copy(fingerprints.begin(), fingerprints.end(), bytes.end() - static_cast<std::ptrdiff_t>(fingerprints.size()));
    return bytes;
}

Result<RankRecord> RankRecord::from_bytes(const void* data, std::size_t size) {
    if (data == nullptr) return malformed("null data");
    if (size < kHeaderSize)
        return malformed(std::to_string(size) + " bytes is shorter than its " + std::to_string(kHeaderSize) +
                         "-byte header");
    cudyn::detail::WireReader in(data, size);
    FixedBytes<8> magic;
    in.fixed(magic);
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
    in.fixed(boot_id);
    FixedBytes<HostIdentity::kMaxHostNameBytes> name;
    in.fixed(name);
    in.reserved(rank_size - kRankPartSize);  // a newer writer's rank fields

    // The record's ints travel as u32: a value past INT_MAX is refused, not cut.
    if (visible > static_cast<std::uint32_t>(INT_MAX)) return malformed(std::to_string(visible) + " visible devices");
    if (driver_version > static_cast<std::uint32_t>(INT_MAX))
        return malformed("driver version " + std::to_string(driver_version) + ", more than an int holds");
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
    if (probe_code != 0) {
        ErrorCode code = ErrorCode::Driver;
        if (!detail::error_code_from_wire(probe_code - 1, code))
            return malformed("the probe failed with error code " + std::to_string(probe_code - 1) +
                             ", more than an int holds");
        record.probe_failure = ProbeFailure{code, detail::driver_result_from_wire(probe_result)};
    }
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
        std::uint32_t identity = 0, clique = 0;
        FixedBytes<16> uuid, cluster;
        PciBusId bus;
        if (entry_size >= kDeviceEntryWithIdentity) {
            in.u32(identity);
            in.fixed(uuid);
            in.u32(bus.domain);
            in.u32(bus.bus);
            in.u32(bus.device);
            in.u32(bus.function);
            in.fixed(cluster);
            in.u32(clique);
            in.reserved(4);
        }
        in.reserved(entry_size - (entry_size >= kDeviceEntryWithIdentity ? kDeviceEntryWithIdentity
                                                                          : kDeviceEntrySize));  // a newer writer's device fields
        if (ordinal >= visible)
            return malformed("device entry " + std::to_string(d) + " names ordinal " + std::to_string(ordinal) +
                             " of " + std::to_string(visible) + " visible devices");
        if (major > static_cast<std::uint32_t>(INT_MAX) || minor > static_cast<std::uint32_t>(INT_MAX))
            return malformed("device entry " + std::to_string(d) + " names compute capability " +
                             std::to_string(major) + "." + std::to_string(minor) + ", more than an int holds");
        DeviceReport device;
        device.ordinal = static_cast<int>(ordinal);
        device.compute = ComputeCapability{static_cast<int>(major), static_cast<int>(minor)};
        for (std::size_t i = 0; i < device_capability_count; ++i)
            if (column_of[i] != kAbsent)
                device.capabilities.*device_capability_list[i].field = ((bits >> column_of[i]) & 1) != 0;
        if (identity & kUuidReported) device.uuid = DeviceUuid{uuid.value};
        if (identity & kBusIdReported) device.pci_bus_id = bus;
        if (identity & kFabricReported)
            device.fabric = FabricDomain{DeviceUuid{cluster.value}, clique, (identity & kFabricHealthy) != 0};
        record.devices.push_back(device);
    }
    // Version 1 ends here (bytes past `needed` are a later part, skipped);
    // from version 2 the fingerprint part follows, then perhaps later parts.
    if (record.version >= 2) {
        if (size == needed)
            return malformed("version " + std::to_string(record.version) + " record without its fingerprint part");
        const auto fingerprints = read_fingerprints(static_cast<const std::uint8_t*>(data) + needed,
                                                    size - static_cast<std::size_t>(needed), record.devices);
        if (!fingerprints) return fingerprints.error();
    }
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
        DeviceReport report{ordinal, *compute, *capabilities, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
        // Identity is for the reader's logs and grouping: a failed query
        // leaves it unreported and the probe goes on.
        if (auto uuid = device->uuid()) report.uuid = *uuid;
        if (auto bus = device->pci_bus_id()) report.pci_bus_id = *bus;
        if (report.uuid && nvml_report().state == NvmlState::Loaded) {
            auto fabric = gpu_fabric(*report.uuid);
            if (fabric && fabric->state == FabricState::Completed)
                report.fabric = FabricDomain{fabric->cluster_uuid, fabric->clique_id, fabric->healthy()};
        }
        if (options.trials) {
            // A failed fingerprint is this device's answer, not the rank's:
            // its capabilities were read, and the collective must go on.
            auto fingerprint = fingerprint_device(*device, FingerprintOptions{options.trial_timeout});
            if (fingerprint) {
                report.fingerprint = DeviceFingerprint::of(*fingerprint);
            } else {
                report.fingerprint = DeviceFingerprint{};
                report.fingerprint->failure = ProbeFailure{fingerprint.error().code, fingerprint.error().driver_result};
                for (auto& trial : report.fingerprint->trials) trial = TrialOutcome::Skipped;
            }
        }
        record.devices.push_back(std::move(report));
    }
    return record;
}

}  // namespace cudyn::mpi
