// The MPI component's pure parts, without MPI or mpirun: rank records as
// bytes (pinned layout, newer and older writers, malformed input), the
// capability agreement, the grouping by host, and the exchange's frames.
// Ranks of one job may run different cudyn versions, so the byte layouts are
// pinned here field by field: a change that moves or drops a field fails even
// when a round trip still passes.
#include "../support/catch.hpp"

#include "cudyn/ipc_memory.hpp"
#include "cudyn/mpi/capability_agreement.hpp"
#include "cudyn/mpi/host_identity.hpp"
#include "cudyn/mpi/peer_descriptor.hpp"
#include "cudyn/mpi/rank_record.hpp"

#include "../../src/mpi/descriptor_frame.hpp"

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
    RankRecord record = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({&cudyn::DeviceCapabilities::win32_handles})},
                                            DeviceReport{2, {8, 6}, all_but({})}});
    record.visible_devices = 3;
    record.probe_failure = cudyn::mpi::ProbeFailure{ErrorCode::OutOfMemory, CUDA_ERROR_OUT_OF_MEMORY};
    record.host.boot_id = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    record.host.host_name = std::string(70, 'h');  // cut at 64 bytes on the wire

    const auto bytes = record.to_bytes();
    CHECK(bytes.size() == 16 + 112 + cudyn::device_capability_count * 4 + 2 * 24);
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
}

TEST_CASE("rank record: a newer writer's extra fields, unknown attributes and parts are skipped",
          "[unit][mpi-records]") {
    // Version 7: 8 more bytes of rank fields, 32-byte device entries, an
    // attribute this cudyn does not know, and a part after the devices.
    Bytes wire = rank_part(7, 8, 1, 1, 32, 2);
    wire.u32(9999).u32(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    wire.u32(0).u32(10).u32(0).u32(0).u64(0b11).u64(0xffffffffffffffffu);
    wire.run(0x55, 40);
    auto record = parse(wire.finish());
    REQUIRE(record.has_value());
    CHECK(record->version == 7);
    CHECK(record->host.host_name == "node7");
    REQUIRE(record->devices.size() == 1);
    CHECK(record->devices[0].compute.major == 10);
    CHECK(record->devices[0].capabilities.memory_pools);
    CHECK(record->reported.memory_pools);
    CHECK_FALSE(record->reported.virtual_memory_management);
}

TEST_CASE("rank record: malformed bytes are InvalidArgument naming what is wrong", "[unit][mpi-records]") {
    const std::vector<std::uint8_t> good = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({})}}).to_bytes();
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

TEST_CASE("capability agreement: AND of flags, lowest versions, and who lacks what", "[unit][mpi-records]") {
    using Caps = cudyn::DeviceCapabilities;
    std::vector<RankRecord> records;
    records.push_back(loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({})}, DeviceReport{1, {9, 0}, all_but({})}}));
    records.push_back(loaded_rank(12080, {DeviceReport{0, {8, 0}, all_but({&Caps::fabric_handles})}}));
    RankRecord no_driver;  // not_found: no devices
    no_driver.host.host_name = "login";
    records.push_back(no_driver);
    RankRecord older = loaded_rank(13000, {DeviceReport{0, {9, 0}, all_but({})}});
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
        loaded_rank(13000, {DeviceReport{0, {9, 0}, without_win32}}),
        loaded_rank(12040, {DeviceReport{0, {8, 9}, all_but({})}, DeviceReport{1, {10, 0}, without_win32}}),
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

TEST_CASE("host identity: this host's boot id is the kernel's", "[unit][mpi-records]") {
    const HostIdentity here = cudyn::mpi::this_host();
    CHECK(here == cudyn::mpi::this_host());
    CHECK(here.host_name.size() <= HostIdentity::kMaxHostNameBytes);
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
    using cudyn::IpcMemDescriptor;
    cudyn::mpi::PeerBytes junk{4, PeerStatus::Received, std::vector<std::uint8_t>(120, 0x42)};
    auto parsed = cudyn::mpi::parse_peer<IpcMemDescriptor>(junk);
    CHECK(parsed.rank == 4);
    CHECK(parsed.status == PeerStatus::Malformed);
    REQUIRE_FALSE(parsed.descriptor.has_value());
    CHECK(parsed.descriptor.error().message.find("rank 4's descriptor: IpcMemDescriptor") == 0);

    cudyn::mpi::PeerBytes away{1, PeerStatus::DifferentHost, cudyn::Error::invalid_argument("elsewhere")};
    auto kept = cudyn::mpi::parse_peer<IpcMemDescriptor>(away);
    CHECK(kept.status == PeerStatus::DifferentHost);
    CHECK(kept.descriptor.error().message == "elsewhere");
    CHECK(std::string(cudyn::mpi::to_string(PeerStatus::DifferentHost)) == "different_host");
}
