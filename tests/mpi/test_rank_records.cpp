// The MPI component's pure parts, without MPI or mpirun: rank records as
// bytes (pinned layout, newer and older writers, malformed input), the
// capability agreement, the grouping by host, and the exchange's frames.
// Ranks of one job may run different cudyn versions, so the byte layouts are
// pinned here field by field: a change that moves or drops a field fails even
// when a round trip still passes.
#include "support/catch.hpp"

#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/mpi/capability_agreement.hpp"
#include "cudyn/mpi/fabric_domains.hpp"
#include "cudyn/mpi/host_identity.hpp"
#include "cudyn/mpi/peer_descriptor.hpp"
#include "cudyn/mpi/rank_record.hpp"

#include "mpi/descriptor_frame.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using cudyn::ErrorCode;
using cudyn::mpi::CapabilityAgreement;
using cudyn::mpi::DeviceReport;
using cudyn::mpi::HostIdentity;
using cudyn::mpi::PeerStatus;
using cudyn::mpi::RankRecord;

namespace {

// Little-endian bytes, built by hand as rank_record.hpp's layout comment says.
class Bytes {
public:
    Bytes& text(const char* value, std::size_t width) {
        const std::size_t size = std::strlen(value);
        for (std::size_t i = 0; i < width; ++i)
            bytes_.push_back(i < size ? static_cast<std::uint8_t>(value[i]) : std::uint8_t{0});
        return *this;
    }
    Bytes& u16(std::uint64_t value) { return integer(value, 2); }
    Bytes& u32(std::uint64_t value) { return integer(value, 4); }
    Bytes& u64(std::uint64_t value) { return integer(value, 8); }
    Bytes& zeros(std::size_t count) {
        bytes_.insert(bytes_.end(), count, 0);
        return *this;
    }
    Bytes& u8(std::uint64_t value) { return integer(value, 1); }
    // A trial name as the fingerprint part writes it: u8 length, then the bytes.
    Bytes& name(const char* value) {
        u8(std::strlen(value));
        return text(value, std::strlen(value));
    }
    Bytes& run(std::uint8_t first, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) bytes_.push_back(static_cast<std::uint8_t>(first + i));
        return *this;
    }
    // Writes the u32 length field (offset 12) once the record is complete.
    std::vector<std::uint8_t> finish() {
        const auto length = static_cast<std::uint32_t>(bytes_.size());
        for (int i = 0; i < 4; ++i) bytes_[12 + i] = static_cast<std::uint8_t>(length >> (8 * i));
        return bytes_;
    }
    const std::vector<std::uint8_t>& get() const { return bytes_; }
    std::size_t size() const { return bytes_.size(); }
    // Writes the u32 at `offset` (a part's size field, say) after the fact.
    Bytes& patch_u32(std::size_t offset, std::uint32_t value) {
        for (int i = 0; i < 4; ++i) bytes_[offset + i] = static_cast<std::uint8_t>(value >> (8 * i));
        return *this;
    }

private:
    Bytes& integer(std::uint64_t value, int width) {
        for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
        return *this;
    }
    std::vector<std::uint8_t> bytes_;
};

// A record header plus version 1's rank part, with `extra_rank` more bytes in
// the rank part (a newer writer's fields).
Bytes rank_part(std::uint16_t version, std::size_t extra_rank, std::uint32_t visible, std::uint16_t entries,
                std::uint16_t entry_size, std::uint16_t rows) {
    Bytes wire;
    wire.text("CUDYNRNK", 8).u16(version).u16(112 + extra_rank).u32(0);  // length: finish()
    wire.u32(0 /* LoadState::Loaded */).u32(12080).u32(visible).u16(entries).u16(entry_size).u16(rows).u16(0);
    wire.u32(0).u32(0).u32(0);           // probe error, probe CUresult, reserved
    wire.run(0xa0, 16).text("node7", 64);  // boot id, host name
    wire.run(0x11, extra_rank);
    return wire;
}

cudyn::Result<RankRecord> parse(const std::vector<std::uint8_t>& bytes) {
    return RankRecord::from_bytes(bytes.data(), bytes.size());
}

// Every capability true except the named ones.
cudyn::DeviceCapabilities all_but(std::initializer_list<bool cudyn::DeviceCapabilities::*> missing) {
    cudyn::DeviceCapabilities capabilities = cudyn::mpi::every_capability();
    for (auto field : missing) capabilities.*field = false;
    return capabilities;
}

RankRecord loaded_rank(int driver_version, std::vector<DeviceReport> devices, const char* host = "node0") {
    RankRecord record;
    record.load_state = cudyn::LoadState::Loaded;
    record.driver_version = driver_version;
    record.visible_devices = static_cast<int>(devices.size());
    record.devices = std::move(devices);
    record.host.host_name = host;
    return record;
}

// The fingerprint outcomes of every trial of this cudyn set to `outcome`.
cudyn::mpi::DeviceFingerprint all_trials(cudyn::TrialOutcome outcome, int ptx_isa) {
    cudyn::mpi::DeviceFingerprint print;
    for (auto& trial : print.trials) trial = outcome;
    print.newest_ptx_isa = ptx_isa;
    return print;
}

std::size_t trial_index(const char* name) {
    for (std::size_t i = 0; i < cudyn::capability_trial_count; ++i)
        if (std::string(cudyn::capability_trial_list[i].name) == name) return i;
    FAIL("no trial " << name);
    return 0;
}

void check_malformed(const std::vector<std::uint8_t>& bytes, const std::string& expected) {
    auto parsed = parse(bytes);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().code == ErrorCode::InvalidArgument);
    INFO(parsed.error().message);
    CHECK(parsed.error().message.find("rank record: ") == 0);
    CHECK(parsed.error().message.find(expected) != std::string::npos);
}

}  // namespace

TEST_CASE("rank record: a round trip keeps every field", "[unit][mpi-records]") {
    RankRecord record = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({&cudyn::DeviceCapabilities::win32_handles}), std::nullopt, std::nullopt, std::nullopt, std::nullopt},
                                            DeviceReport{2, {8, 6}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}});
    record.visible_devices = 3;
    record.probe_failure = cudyn::mpi::ProbeFailure{ErrorCode::OutOfMemory, CUDA_ERROR_OUT_OF_MEMORY};
    record.host.boot_id = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    record.host.host_name = std::string(70, 'h');  // cut at 64 bytes on the wire
    record.devices[0].fingerprint = all_trials(cudyn::TrialOutcome::Works, 90);
    record.devices[0].fingerprint->trials[trial_index("fabric_export")] = cudyn::TrialOutcome::TimedOut;
    record.devices[0].fingerprint->trials[trial_index("vmm_win32")] = cudyn::TrialOutcome::Skipped;
    record.devices[0].uuid = *cudyn::DeviceUuid::parse("GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
    record.devices[0].pci_bus_id = cudyn::PciBusId{0x10002, 0xc1, 0x1f, 7};

    const auto bytes = record.to_bytes();
    std::size_t names = 0;
    for (const auto& trial : cudyn::capability_trial_list) names += 1 + std::strlen(trial.name);
    CHECK(bytes.size() == 16 + 112 + cudyn::device_capability_count * 4 + 2 * 80 + 8 + names +
                              2 * (12 + cudyn::capability_trial_count));
    auto back = parse(bytes);
    REQUIRE(back.has_value());
    CHECK(back->version == cudyn::mpi::kRankRecordVersion);
    CHECK(back->load_state == cudyn::LoadState::Loaded);
    CHECK(back->driver_version == 13000);
    CHECK(back->visible_devices == 3);
    REQUIRE(back->devices.size() == 2);
    CHECK(back->devices[0].ordinal == 0);
    CHECK(back->devices[0].compute.major == 9);
    CHECK_FALSE(back->devices[0].capabilities.win32_handles);
    CHECK(back->devices[0].capabilities.fabric_handles);
    CHECK(back->devices[1].ordinal == 2);
    CHECK(back->devices[1].compute.minor == 6);
    CHECK(back->devices[1].capabilities.win32_handles);
    REQUIRE(back->probe_failure.has_value());
    CHECK(back->probe_failure->code == ErrorCode::OutOfMemory);
    CHECK(back->probe_failure->driver_result == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(back->host.boot_id == record.host.boot_id);
    CHECK(back->host.host_name == std::string(64, 'h'));
    for (const auto& row : cudyn::device_capability_list) CHECK(back->reported.*row.field);
    REQUIRE(back->devices[0].fingerprint.has_value());
    const cudyn::mpi::DeviceFingerprint& print = *back->devices[0].fingerprint;
    CHECK(print.newest_ptx_isa == 90);
    CHECK_FALSE(print.failure.has_value());
    CHECK(print.outcome("vmm") == cudyn::TrialOutcome::Works);
    CHECK(print.outcome("fabric_export") == cudyn::TrialOutcome::TimedOut);
    CHECK(print.outcome("vmm_win32") == cudyn::TrialOutcome::Skipped);
    CHECK_FALSE(print.outcome("no_such_trial").has_value());
    CHECK_FALSE(back->devices[1].fingerprint.has_value());  // no trials run there
    REQUIRE(back->devices[0].uuid.has_value());
    CHECK(back->devices[0].uuid->to_string() == "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff");
    REQUIRE(back->devices[0].pci_bus_id.has_value());
    CHECK(*back->devices[0].pci_bus_id == (cudyn::PciBusId{0x10002, 0xc1, 0x1f, 7}));
    CHECK_FALSE(back->devices[1].uuid.has_value());  // not reported
    CHECK_FALSE(back->devices[1].pci_bus_id.has_value());

    // A fingerprint that failed keeps its error, and an outcome a record
    // read from an older peer did not have stays unknown when written again.
    record.devices[1].fingerprint = all_trials(cudyn::TrialOutcome::Skipped, 0);
    record.devices[1].fingerprint->failure = cudyn::mpi::ProbeFailure{ErrorCode::Driver, CUDA_ERROR_NOT_INITIALIZED};
    record.devices[0].fingerprint->trials[trial_index("dma_buf")] = std::nullopt;
    const auto again = record.to_bytes();
    back = parse(again);
    REQUIRE(back.has_value());
    REQUIRE(back->devices[1].fingerprint.has_value());
    REQUIRE(back->devices[1].fingerprint->failure.has_value());
    CHECK(back->devices[1].fingerprint->failure->code == ErrorCode::Driver);
    CHECK(back->devices[1].fingerprint->failure->driver_result == CUDA_ERROR_NOT_INITIALIZED);
    CHECK(back->devices[1].fingerprint->outcome("vmm") == cudyn::TrialOutcome::Skipped);
    CHECK_FALSE(back->devices[0].fingerprint->outcome("dma_buf").has_value());
    CHECK(back->devices[0].fingerprint->outcome("ptx_jit") == cudyn::TrialOutcome::Works);
}

TEST_CASE("rank record: version 2's fingerprint part built by hand, trials matched by name", "[unit][mpi-records]") {
    Bytes wire = rank_part(2, 0, 2, 2, 24, 0);
    wire.u32(0).u32(9).u32(0).u32(0).u64(0);
    wire.u32(1).u32(9).u32(0).u32(0).u64(0);
    const std::size_t part = wire.size();
    wire.u32(0).u16(3).u16(12 + 3);
    wire.name("ptx_jit").name("vmm").name("fabric_export");
    wire.u32(1).u32(0).u32(88).u8(0).u8(0).u8(1);  // device 0: ptx_jit and vmm work, fabric_export refused
    wire.u32(2 + static_cast<std::uint32_t>(ErrorCode::OutOfMemory)).u32(CUDA_ERROR_OUT_OF_MEMORY).u32(0);
    wire.u8(3).u8(3).u8(3);  // device 1: fingerprint_device failed, every trial skipped
    wire.patch_u32(part, static_cast<std::uint32_t>(wire.size() - part));
    auto record = parse(wire.finish());
    REQUIRE(record.has_value());
    CHECK(record->version == 2);
    REQUIRE(record->devices.size() == 2);
    REQUIRE(record->devices[0].fingerprint.has_value());
    const auto& first = *record->devices[0].fingerprint;
    CHECK(first.newest_ptx_isa == 88);
    CHECK(first.outcome("ptx_jit") == cudyn::TrialOutcome::Works);
    CHECK(first.outcome("vmm") == cudyn::TrialOutcome::Works);
    CHECK(first.outcome("fabric_export") == cudyn::TrialOutcome::Refused);
    CHECK_FALSE(first.outcome("memory_pools").has_value());  // not in its table: unknown
    REQUIRE(record->devices[1].fingerprint.has_value());
    REQUIRE(record->devices[1].fingerprint->failure.has_value());
    CHECK(record->devices[1].fingerprint->failure->code == ErrorCode::OutOfMemory);
    CHECK(record->devices[1].fingerprint->outcome("vmm") == cudyn::TrialOutcome::Skipped);
    CHECK_FALSE(record->devices[0].uuid.has_value());  // a version-2 entry has no identity: not reported
    CHECK_FALSE(record->devices[0].pci_bus_id.has_value());

    // State 0: no trials run on that device, whatever its outcome bytes say.
    Bytes none = rank_part(2, 0, 1, 1, 24, 0);
    none.u32(0).u32(9).u32(0).u32(0).u64(0);
    none.u32(8 + 4 + 13).u16(1).u16(13).name("vmm").u32(0).u32(0).u32(0).u8(0);
    auto without = parse(none.finish());
    REQUIRE(without.has_value());
    CHECK_FALSE(without->devices[0].fingerprint.has_value());
}

TEST_CASE("rank record: version 1 bytes built by hand, capabilities matched by attribute", "[unit][mpi-records]") {
    // A writer that knew three capabilities, in its own order.
    Bytes wire = rank_part(1, 0, 2, 1, 24, 3);
    wire.u32(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)
        .u32(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
        .u32(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    wire.u32(1).u32(9).u32(0).u32(0).u64(0b110);  // ordinal 1, 9.0: VMM and managed yes, fabric no
    auto record = parse(wire.finish());
    REQUIRE(record.has_value());
    CHECK(record->load_state == cudyn::LoadState::Loaded);
    CHECK(record->driver_version == 12080);
    CHECK(record->host.host_name == "node7");
    CHECK(record->host.boot_id[0] == 0xa0);
    CHECK(record->host.boot_id[15] == 0xaf);
    CHECK_FALSE(record->probe_failure.has_value());
    REQUIRE(record->devices.size() == 1);
    const DeviceReport& device = record->devices[0];
    CHECK(device.ordinal == 1);
    CHECK(device.capabilities.virtual_memory_management);
    CHECK(device.capabilities.managed_memory);
    CHECK_FALSE(device.capabilities.fabric_handles);
    CHECK(record->reported.fabric_handles);  // said no
    CHECK(record->reported.managed_memory);
    CHECK_FALSE(record->reported.memory_pools);  // never said: unknown
    CHECK_FALSE(device.capabilities.memory_pools);
    CHECK_FALSE(device.fingerprint.has_value());  // version 1 has no fingerprint part
}

TEST_CASE("rank record: a newer writer's extra fields, unknown attributes and parts are skipped",
          "[unit][mpi-records]") {
    // Version 7: 8 more bytes of rank fields, 32-byte device entries, an
    // attribute this cudyn does not know, and a part after the devices.
    Bytes wire = rank_part(7, 8, 1, 1, 32, 2);
    wire.u32(9999).u32(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    wire.u32(0).u32(10).u32(0).u32(0).u64(0b11).u64(0xffffffffffffffffu);
    // Its fingerprint part: a trial this cudyn does not know, an outcome it
    // has no name for, 4 more bytes per entry and 6 more after the entries.
    const std::size_t part = wire.size();
    wire.u32(0).u16(3).u16(12 + 3 + 4);
    wire.name("teleport").name("vmm").name("host_vmm");
    wire.u32(1).u32(0).u32(91).u8(1).u8(0).u8(42).u32(0xdeadbeef);
    wire.run(0x77, 6);
    wire.patch_u32(part, static_cast<std::uint32_t>(wire.size() - part));
    wire.run(0x55, 40);  // and a part after it
    auto record = parse(wire.finish());
    REQUIRE(record.has_value());
    CHECK(record->version == 7);
    CHECK(record->host.host_name == "node7");
    REQUIRE(record->devices.size() == 1);
    CHECK(record->devices[0].compute.major == 10);
    CHECK(record->devices[0].capabilities.memory_pools);
    CHECK(record->reported.memory_pools);
    CHECK_FALSE(record->reported.virtual_memory_management);
    REQUIRE(record->devices[0].fingerprint.has_value());
    const auto& print = *record->devices[0].fingerprint;
    CHECK(print.newest_ptx_isa == 91);
    CHECK(print.outcome("vmm") == cudyn::TrialOutcome::Works);
    CHECK(print.outcome("host_vmm") == cudyn::TrialOutcome::Failed);  // outcome 42: not "works"
    CHECK_FALSE(print.outcome("teleport").has_value());
    CHECK_FALSE(print.outcome("ptx_jit").has_value());
}

TEST_CASE("rank record: malformed bytes are InvalidArgument naming what is wrong", "[unit][mpi-records]") {
    const std::vector<std::uint8_t> good = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}}).to_bytes();
    REQUIRE(parse(good).has_value());

    CHECK(RankRecord::from_bytes(nullptr, 16).error().message == "rank record: null data");
    check_malformed(std::vector<std::uint8_t>(good.begin(), good.begin() + 15), "shorter than its 16-byte header");
    auto wrong_magic = good;
    wrong_magic[0] = 'X';
    check_malformed(wrong_magic, "wrong magic");
    auto version_zero = good;
    version_zero[8] = 0;
    check_malformed(version_zero, "version 0");
    auto truncated = good;
    truncated.pop_back();
    check_malformed(truncated, "length field says");

    Bytes small_rank;
    small_rank.text("CUDYNRNK", 8).u16(1).u16(100).u32(0).zeros(100);
    check_malformed(small_rank.finish(), "rank part of 100 bytes");
    Bytes short_rank;
    short_rank.text("CUDYNRNK", 8).u16(1).u16(112).u32(0).zeros(50);
    check_malformed(short_rank.finish(), "cannot hold its 112-byte rank part");

    Bytes missing_entries = rank_part(1, 0, 2, 2, 24, 0);
    missing_entries.u32(0).u32(9).u32(0).u32(0).u64(0);  // one of the two entries announced
    check_malformed(missing_entries.finish(), "cannot hold 0 capability rows and 2 device entries");
    Bytes too_many_rows = rank_part(1, 0, 0, 0, 24, 65);
    too_many_rows.zeros(65 * 4);
    check_malformed(too_many_rows.finish(), "65 capability rows");
    Bytes twice = rank_part(1, 0, 0, 0, 24, 2);
    twice.u32(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY).u32(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    check_malformed(twice.finish(), "listed twice");
    Bytes small_entry = rank_part(1, 0, 1, 1, 16, 0);
    small_entry.zeros(16);
    check_malformed(small_entry.finish(), "device entries of 16 bytes");
    Bytes past_visible = rank_part(1, 0, 1, 1, 24, 0);
    past_visible.u32(1).u32(9).u32(0).u32(0).u64(0);
    check_malformed(past_visible.finish(), "names ordinal 1 of 1 visible devices");

    // Version 2's fingerprint part: one device entry, then the part.
    const auto with_part = [](std::uint32_t part_size, std::uint16_t names, std::uint16_t entry_size) {
        Bytes wire = rank_part(2, 0, 1, 1, 24, 0);
        wire.u32(0).u32(9).u32(0).u32(0).u64(0);
        wire.u32(part_size).u16(names).u16(entry_size);
        return wire;
    };
    check_malformed(rank_part(2, 0, 0, 0, 24, 0).finish(), "version 2 record without its fingerprint part");
    Bytes stub = rank_part(2, 0, 0, 0, 24, 0);
    stub.u32(8);
    check_malformed(stub.finish(), "4 bytes after the device entries cannot hold a fingerprint part");
    Bytes too_long = with_part(100, 0, 12);
    too_long.zeros(12);
    check_malformed(too_long.finish(), "fingerprint part of 100 bytes, 20 bytes are left");
    Bytes too_short = with_part(4, 0, 12);
    too_short.zeros(12);
    check_malformed(too_short.finish(), "fingerprint part of 4 bytes");
    Bytes small_fingerprint = with_part(8 + 4 + 12, 1, 12);
    small_fingerprint.name("vmm").zeros(12);
    check_malformed(small_fingerprint.finish(), "fingerprint entries of 12 bytes cannot hold 1 trial outcomes");
    Bytes empty_name = with_part(8 + 1 + 13, 1, 13);
    empty_name.u8(0).zeros(13);
    check_malformed(empty_name.finish(), "trial name 0 is empty");
    Bytes long_name = with_part(8 + 4, 1, 13);
    long_name.u8(200).text("vmm", 3);
    check_malformed(long_name.finish(), "trial name 0 is empty or runs past its 12-byte fingerprint part");
    Bytes named_twice = with_part(8 + 8 + 14, 2, 14);
    named_twice.name("vmm").name("vmm").zeros(14);
    check_malformed(named_twice.finish(), "trial \"vmm\" named twice");
    Bytes missing_entry = with_part(8 + 4, 1, 13);
    missing_entry.name("vmm");
    check_malformed(missing_entry.finish(), "fingerprint part of 12 bytes cannot hold 1 entries of 13 bytes");
}

TEST_CASE("rank record: a CUresult or ErrorCode from a newer peer does not leave the enums' ranges",
          "[unit][mpi-records]") {
    Bytes wire;
    wire.text("CUDYNRNK", 8).u16(1).u16(112).u32(0);
    wire.u32(9).u32(0).u32(0).u16(0).u16(24).u16(0).u16(0);  // load state 9: one this cudyn has no name for
    wire.u32(40).u32(123456).u32(0);                          // ErrorCode 39, CUresult past cuda.h's range
    wire.zeros(16).text("n", 64);
    auto record = parse(wire.finish());
    REQUIRE(record.has_value());
    CHECK_FALSE(record->driver_loaded());
    REQUIRE(record->probe_failure.has_value());
    CHECK(static_cast<int>(record->probe_failure->code) == 39);
    CHECK(record->probe_failure->driver_result == CUDA_ERROR_UNKNOWN);
}

TEST_CASE("rank record: a u32 past INT_MAX for an int (driver version, error code) is refused, not cut",
          "[unit][mpi-records]") {
    const auto rank = [](std::uint32_t driver_version, std::uint32_t probe_code) {
        Bytes wire;
        wire.text("CUDYNRNK", 8).u16(1).u16(112).u32(0);
        wire.u32(0).u32(driver_version).u32(0).u16(0).u16(24).u16(0).u16(0);
        wire.u32(probe_code).u32(0).u32(0);
        wire.zeros(16).text("n", 64);
        return wire.finish();
    };
    REQUIRE(parse(rank(0x7fffffffu, 0x80000000u)).has_value());  // ErrorCode INT_MAX: still an int
    check_malformed(rank(0x80000000u, 0), "driver version 2147483648, more than an int holds");
    check_malformed(rank(13000, 0x80000001u), "error code 2147483648, more than an int holds");
}

TEST_CASE("capability agreement: AND of flags, lowest versions, and who lacks what", "[unit][mpi-records]") {
    using Caps = cudyn::DeviceCapabilities;
    std::vector<RankRecord> records;
    records.push_back(loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}, DeviceReport{1, {9, 0}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}}));
    records.push_back(loaded_rank(12080, {DeviceReport{0, {8, 0}, all_but({&Caps::fabric_handles}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}}));
    RankRecord no_driver;  // not_found: no devices
    no_driver.host.host_name = "login";
    records.push_back(no_driver);
    RankRecord older = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}});
    older.version = 1;
    older.reported.memory_pools = false;  // its cudyn did not know the row
    older.devices[0].capabilities.memory_pools = false;
    records.push_back(older);
    records[1].probe_failure = cudyn::mpi::ProbeFailure{ErrorCode::Driver, CUDA_ERROR_UNKNOWN};

    const CapabilityAgreement agreement = cudyn::mpi::agree_on_capabilities(records);
    CHECK(agreement.rank_count == 4);
    CHECK_FALSE(agreement.unanimous());
    CHECK(agreement.min_driver_version == 0);  // rank 2 has no driver
    CHECK(agreement.min_visible_devices == 0);
    CHECK(agreement.min_compute.major == 0);   // rank 2 reported no device
    CHECK(agreement.min_record_version == 1);
    CHECK(agreement.without_driver == std::vector<int>{2});
    CHECK(agreement.without_devices == std::vector<int>{2});
    CHECK(agreement.probe_failed == std::vector<int>{1});
    for (const auto& row : cudyn::device_capability_list) CHECK_FALSE(agreement.common.*row.field);
    // Rank 2 lacks everything: every capability has a shortfall, in .def order.
    REQUIRE(agreement.shortfalls.size() == cudyn::device_capability_count);
    CHECK(std::string(agreement.shortfalls.front().capability) == cudyn::device_capability_list[0].name);

    const auto* fabric = agreement.shortfall("fabric_handles");
    REQUIRE(fabric != nullptr);
    CHECK(fabric->lacking == std::vector<int>{1, 2});
    CHECK(fabric->unknown.empty());
    const auto* pools = agreement.shortfall("memory_pools");
    REQUIRE(pools != nullptr);
    CHECK(pools->lacking == std::vector<int>{2});
    CHECK(pools->unknown == std::vector<int>{3});
    CHECK(agreement.shortfall("no_such_capability") == nullptr);
    CHECK(agreement.shortfall(nullptr) == nullptr);
}

TEST_CASE("capability agreement: ranks that all agree; the lowest compute capability; no ranks at all",
          "[unit][mpi-records]") {
    using Caps = cudyn::DeviceCapabilities;
    const auto without_win32 = all_but({&Caps::win32_handles, &Caps::win32_kmt_handles});
    std::vector<RankRecord> records = {
        loaded_rank(13000, {DeviceReport{0, {9, 0}, without_win32, std::nullopt, std::nullopt, std::nullopt, std::nullopt}}),
        loaded_rank(12040, {DeviceReport{0, {8, 9}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}, DeviceReport{1, {10, 0}, without_win32, std::nullopt, std::nullopt, std::nullopt, std::nullopt}}),
    };
    const CapabilityAgreement agreement = cudyn::mpi::agree_on_capabilities(records);
    CHECK(agreement.min_driver_version == 12040);
    CHECK(agreement.min_visible_devices == 1);
    CHECK(agreement.min_compute.major == 8);
    CHECK(agreement.min_compute.minor == 9);
    CHECK(agreement.without_devices.empty());
    CHECK(agreement.common.fabric_handles);
    CHECK(agreement.common.virtual_memory_management);
    CHECK_FALSE(agreement.common.win32_handles);
    REQUIRE(agreement.shortfalls.size() == 2);  // only the two Win32 rows
    CHECK(agreement.shortfall("win32_handles")->lacking == std::vector<int>{0, 1});
    records[1].devices[1].capabilities = all_but({});
    records[0].devices[0].capabilities = all_but({});
    CHECK(cudyn::mpi::agree_on_capabilities(records).unanimous());

    const CapabilityAgreement none = cudyn::mpi::agree_on_capabilities({});
    CHECK(none.rank_count == 0);
    CHECK_FALSE(none.common.virtual_memory_management);
}

TEST_CASE("capability agreement: trials that work everywhere, who they failed on, the lowest PTX ISA",
          "[unit][mpi-records]") {
    using cudyn::TrialOutcome;
    const auto works = all_trials(TrialOutcome::Works, 90);
    auto no_fabric = all_trials(TrialOutcome::Works, 87);
    no_fabric.trials[trial_index("fabric_export")] = TrialOutcome::Refused;
    auto timed_out = all_trials(TrialOutcome::Works, 90);
    timed_out.trials[trial_index("fabric_export")] = TrialOutcome::TimedOut;
    timed_out.trials[trial_index("ptx_jit")] = TrialOutcome::Skipped;
    auto older_cudyn = all_trials(TrialOutcome::Works, 90);  // a cudyn without the dma_buf trial
    older_cudyn.trials[trial_index("dma_buf")] = std::nullopt;
    const cudyn::DeviceCapabilities caps = all_but({});

    std::vector<RankRecord> records = {
        loaded_rank(13000, {DeviceReport{0, {9, 0}, caps, works, std::nullopt, std::nullopt, std::nullopt}, DeviceReport{1, {9, 0}, caps, no_fabric, std::nullopt, std::nullopt, std::nullopt}}),
        loaded_rank(13000, {DeviceReport{0, {9, 0}, caps, timed_out, std::nullopt, std::nullopt, std::nullopt}}),
        loaded_rank(13000, {DeviceReport{0, {9, 0}, caps, older_cudyn, std::nullopt, std::nullopt, std::nullopt}}),
    };
    CapabilityAgreement agreement = cudyn::mpi::agree_on_capabilities(records);
    CHECK(agreement.min_ptx_isa == 87);
    CHECK(agreement.fingerprint_failed.empty());
    CHECK(agreement.trial_common("vmm"));
    CHECK(agreement.trial_common("host_numa_vmm"));
    CHECK_FALSE(agreement.trial_common("fabric_export"));
    CHECK_FALSE(agreement.trial_common("no_such_trial"));
    CHECK_FALSE(agreement.trial_common(nullptr));
    CHECK(agreement.common_trials.size() + agreement.trial_shortfalls.size() == cudyn::capability_trial_count);
    REQUIRE(agreement.trial_shortfalls.size() == 3);  // in capability_trials.def order
    CHECK(std::string(agreement.trial_shortfalls[0].trial) == "fabric_export");
    const auto* fabric = agreement.trial_shortfall("fabric_export");
    REQUIRE(fabric != nullptr);
    REQUIRE(fabric->failed.size() == 2);
    CHECK(fabric->failed[0].rank == 0);
    CHECK(fabric->failed[0].outcome == TrialOutcome::Refused);  // device 1's answer
    CHECK(fabric->failed[1].rank == 1);
    CHECK(fabric->failed[1].outcome == TrialOutcome::TimedOut);
    CHECK(fabric->unknown.empty());
    const auto* dma_buf = agreement.trial_shortfall("dma_buf");
    REQUIRE(dma_buf != nullptr);
    CHECK(dma_buf->failed.empty());
    CHECK(dma_buf->unknown == std::vector<int>{2});  // unknown, not "does not work"
    CHECK(agreement.trial_shortfall("ptx_jit")->failed.front().outcome == TrialOutcome::Skipped);
    CHECK(agreement.trial_shortfall("vmm") == nullptr);

    // A version-1 rank (no fingerprint), one whose fingerprint failed, and
    // one without a device.
    records[2].devices[0].fingerprint = std::nullopt;
    records[2].version = 1;
    auto failed = all_trials(TrialOutcome::Skipped, 0);
    failed.failure = cudyn::mpi::ProbeFailure{ErrorCode::Driver, CUDA_ERROR_LAUNCH_FAILED};
    records.push_back(loaded_rank(13000, {DeviceReport{0, {9, 0}, caps, failed, std::nullopt, std::nullopt, std::nullopt}}));
    records.push_back(loaded_rank(13000, {}));
    agreement = cudyn::mpi::agree_on_capabilities(records);
    CHECK(agreement.common_trials.empty());
    CHECK(agreement.min_ptx_isa == 0);
    CHECK(agreement.fingerprint_failed == std::vector<int>{3});
    const auto* vmm = agreement.trial_shortfall("vmm");
    REQUIRE(vmm != nullptr);
    CHECK(vmm->unknown == std::vector<int>{2});
    REQUIRE(vmm->failed.size() == 2);
    CHECK(vmm->failed[0].rank == 3);
    CHECK(vmm->failed[0].outcome == TrialOutcome::Skipped);
    CHECK(vmm->failed[1].rank == 4);

    // Everywhere: every trial common, the PTX ISA of the one device.
    const auto alone = cudyn::mpi::agree_on_capabilities({loaded_rank(13000, {DeviceReport{0, {9, 0}, caps, works, std::nullopt, std::nullopt, std::nullopt}})});
    CHECK(alone.common_trials.size() == cudyn::capability_trial_count);
    CHECK(alone.trial_shortfalls.empty());
    CHECK(alone.min_ptx_isa == 90);
    const auto none = cudyn::mpi::agree_on_capabilities({});
    CHECK(none.common_trials.empty());
    CHECK(none.min_ptx_isa == 0);
}

TEST_CASE("host groups: boot id and host name together, numbered by lowest rank", "[unit][mpi-records]") {
    HostIdentity a, a_other_name, b, nameless_boot;
    a.boot_id[0] = 1;
    a.host_name = "node0";
    a_other_name = a;
    a_other_name.host_name = "pod-3";  // another UTS namespace on the same kernel
    b.boot_id[0] = 2;
    b.host_name = "node0";  // the same name on another machine
    nameless_boot.host_name = "node0";  // the boot id hidden: the name alone
    const auto groups = cudyn::mpi::group_by_host({b, a, a, b, a_other_name, nameless_boot, nameless_boot});
    REQUIRE(groups.hosts.size() == 4);
    CHECK(groups.host_of_rank == std::vector<int>{0, 1, 1, 0, 2, 3, 3});
    CHECK(groups.ranks_of_host[0] == std::vector<int>{0, 3});
    CHECK(groups.ranks_of_host[1] == std::vector<int>{1, 2});
    CHECK(groups.ranks_of_host[3] == std::vector<int>{5, 6});
    CHECK(groups.hosts[0] == b);
    CHECK(groups.same_host(1, 2));
    CHECK_FALSE(groups.same_host(1, 4));
    CHECK_FALSE(groups.same_host(0, 7));
    CHECK_FALSE(groups.same_host(-1, 0));
    CHECK(nameless_boot.describe() == "node0 (no boot id)");
    CHECK(a.describe() == "node0 (boot id 01000000-0000-0000-0000-000000000000)");
}

TEST_CASE("host identity: this host's name and boot id are the kernel's", "[unit][mpi-records]") {
    const HostIdentity here = cudyn::mpi::this_host();
    CHECK(here.host_name.size() <= HostIdentity::kMaxHostNameBytes);
    // The name is the kernel's (cut to the longest kept), read here from /proc
    // rather than through gethostname as the library does.
    std::ifstream name_file("/proc/sys/kernel/hostname");
    std::string kernel_name;
    if (std::getline(name_file, kernel_name)) {
        CHECK_FALSE(here.host_name.empty());
        CHECK(here.host_name == kernel_name.substr(0, HostIdentity::kMaxHostNameBytes));
    }
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::string text;
    if (!(file >> text)) {
        CHECK_FALSE(here.has_boot_id());
        return;
    }
    text.erase(std::remove(text.begin(), text.end(), '-'), text.end());
    REQUIRE(text.size() == 32);
    CHECK(here.describe().find(here.host_name + " (boot id ") == 0);
    for (std::size_t i = 0; i < 16; ++i)
        CHECK(here.boot_id[i] == static_cast<std::uint8_t>(std::stoul(text.substr(2 * i, 2), nullptr, 16)));
}

TEST_CASE("probe_this_rank without a driver: the load state, no devices, no failure", "[unit][mpi-records]") {
    // The unit suite runs with CUDYN_DRIVER_PATH naming a file that does not exist.
    const RankRecord record = cudyn::mpi::probe_this_rank();
    CHECK(record.load_state == cudyn::LoadState::NotFound);
    CHECK(record.visible_devices == 0);
    CHECK(record.devices.empty());
    CHECK_FALSE(record.probe_failure.has_value());
    CHECK(record.host == cudyn::mpi::this_host());
    REQUIRE(parse(record.to_bytes()).has_value());
}

TEST_CASE("exchange frames: a descriptor, or the error that left a rank without one", "[unit][mpi-records]") {
    using cudyn::mpi::detail::read_contribution;
    using cudyn::mpi::detail::write_contribution;
    const std::vector<std::uint8_t> descriptor = {1, 2, 3, 4, 5};
    const auto shared = write_contribution(descriptor);
    CHECK(shared.size() == 16 + 5);
    auto received = read_contribution(3, shared.data(), shared.size());
    CHECK(received.rank == 3);
    CHECK(received.status == PeerStatus::Received);
    REQUIRE(received.bytes.has_value());
    CHECK(*received.bytes == descriptor);

    const cudyn::Error why = cudyn::Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuIpcGetMemHandle", "not cuMemAlloc memory");
    const auto nothing = write_contribution(why);
    auto told = read_contribution(2, nothing.data(), nothing.size());
    CHECK(told.status == PeerStatus::NothingShared);
    REQUIRE_FALSE(told.bytes.has_value());
    CHECK(told.bytes.error().code == why.code);
    CHECK(told.bytes.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(told.bytes.error().entry_point == "cuIpcGetMemHandle");
    CHECK(told.bytes.error().message == "rank 2 shared nothing: not cuMemAlloc memory");

    const auto malformed = [](std::vector<std::uint8_t> bytes, const std::string& expected) {
        auto peer = read_contribution(5, bytes.data(), bytes.size());
        CHECK(peer.status == PeerStatus::Malformed);
        REQUIRE_FALSE(peer.bytes.has_value());
        CHECK(peer.bytes.error().code == ErrorCode::InvalidArgument);
        INFO(peer.bytes.error().message);
        CHECK(peer.bytes.error().message.find("rank 5's contribution: ") == 0);
        CHECK(peer.bytes.error().message.find(expected) != std::string::npos);
    };
    CHECK(read_contribution(1, nullptr, 0).status == PeerStatus::Malformed);
    malformed(std::vector<std::uint8_t>(shared.begin(), shared.begin() + 10), "shorter than its 16-byte header");
    auto magic = shared;
    magic[7] = 'Y';
    malformed(magic, "wrong magic");
    auto version = shared;
    version[8] = 0;
    malformed(version, "version 0");
    auto longer = shared;
    longer.push_back(0);
    malformed(longer, "length field says 21 bytes, 22 were given");
    auto kind = shared;
    kind[10] = 9;
    malformed(kind, "unknown kind 9");
    auto short_error = nothing;
    short_error.resize(20);
    short_error[12] = 20;
    malformed(short_error, "cannot hold the error");
    auto long_text = nothing;
    long_text[16 + 10] = 0xff;  // message size 0x..ff: past the frame
    malformed(long_text, "do not fit");
}

TEST_CASE("parse_peer: a peer's bytes as a descriptor kind, Malformed naming the rank", "[unit][mpi-records]") {
    using cudyn::IpcMemoryDescriptor;
    cudyn::mpi::PeerBytes junk{4, PeerStatus::Received, std::vector<std::uint8_t>(120, 0x42)};
    auto parsed = cudyn::mpi::parse_peer<IpcMemoryDescriptor>(junk);
    CHECK(parsed.rank == 4);
    CHECK(parsed.status == PeerStatus::Malformed);
    REQUIRE_FALSE(parsed.descriptor.has_value());
    CHECK(parsed.descriptor.error().message.find("rank 4's descriptor: IpcMemoryDescriptor") == 0);

    cudyn::mpi::PeerBytes away{1, PeerStatus::DifferentHost, cudyn::Error::invalid_argument("elsewhere")};
    auto kept = cudyn::mpi::parse_peer<IpcMemoryDescriptor>(away);
    CHECK(kept.status == PeerStatus::DifferentHost);
    CHECK(kept.descriptor.error().message == "elsewhere");
    CHECK(std::string(cudyn::mpi::to_string(PeerStatus::DifferentHost)) == "different_host");
}

TEST_CASE("fabric domains: two NVLink domains across three hosts, and who can share through fabric handles",
          "[unit][mpi-records]") {
    const auto cluster_a = *cudyn::DeviceUuid::parse("GPU-aaaaaaaa-0000-4000-8000-000000000001");
    const auto cluster_b = *cudyn::DeviceUuid::parse("GPU-bbbbbbbb-0000-4000-8000-000000000002");
    const auto rank_on = [&](const cudyn::DeviceUuid& cluster, unsigned clique, bool healthy,
                             cudyn::TrialOutcome fabric_export, const char* host) {
        RankRecord record = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({}), all_trials(cudyn::TrialOutcome::Works, 90),
                                                             std::nullopt, std::nullopt,
                                                             cudyn::mpi::FabricDomain{cluster, clique, healthy}}});
        record.devices[0].fingerprint->trials[trial_index("fabric_export")] = fabric_export;
        record.host.host_name = host;
        return record;
    };
    using cudyn::TrialOutcome;
    std::vector<RankRecord> records = {
        rank_on(cluster_a, 1, true, TrialOutcome::Works, "node-a"),    // rank 0
        rank_on(cluster_b, 1, true, TrialOutcome::Works, "node-b"),    // rank 1
        rank_on(cluster_a, 1, true, TrialOutcome::Works, "node-c"),    // rank 2: rank 0's domain, another host
        rank_on(cluster_a, 2, true, TrialOutcome::Works, "node-c"),    // rank 3: same cluster, other clique
        rank_on(cluster_a, 1, false, TrialOutcome::Works, "node-d"),   // rank 4: unhealthy
        rank_on(cluster_a, 1, true, TrialOutcome::Refused, "node-d"),  // rank 5: no IMEX channel
        loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({}), std::nullopt, std::nullopt, std::nullopt, std::nullopt}}),
        // rank 7: registered in no cluster (NVLink within its node only): no domain
        rank_on(cudyn::DeviceUuid{}, 0, false, TrialOutcome::Refused, "node-e"),
    };
    // Through the bytes, as the survey sees them.
    for (RankRecord& record : records) {
        const auto bytes = record.to_bytes();
        record = *parse(bytes);
    }
    REQUIRE(records[0].devices[0].fabric.has_value());
    CHECK(records[0].devices[0].fabric->cluster_uuid == cluster_a);
    CHECK(records[4].devices[0].fabric->healthy == false);
    CHECK_FALSE(records[6].devices[0].fabric.has_value());

    const cudyn::mpi::FabricDomains groups = cudyn::mpi::group_by_fabric_domain(records);
    REQUIRE(groups.domains.size() == 3);
    CHECK(groups.domains[0].ranks == std::vector<int>{0, 2, 4, 5});
    CHECK(groups.domains[1].cluster_uuid == cluster_b);
    CHECK(groups.domains[1].ranks == std::vector<int>{1});
    CHECK(groups.domains[2].clique_id == 2);
    CHECK(groups.domain_of_rank == std::vector<int>{0, 1, 0, 2, 0, 0, -1, -1});
    CHECK(groups.same_domain(0, 2));
    CHECK_FALSE(groups.same_domain(0, 3));
    CHECK_FALSE(groups.same_domain(6, 6));
    CHECK_FALSE(groups.same_domain(7, 7));
    CHECK_FALSE(groups.same_domain(0, 8));
    // Only 0 and 2: across hosts; 4 is unhealthy, 5 cannot export.
    CHECK(groups.fabric_pairs == std::vector<std::pair<int, int>>{{0, 2}});
}
