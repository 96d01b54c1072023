// The bytes every IPC record puts on the wire, pinned: each record is read
// from bytes built here by hand, field by field, and written back to the same
// bytes. Two processes built from different versions of cudyn must agree on
// this layout, so a change to a record's WireLayout that moves, widens or
// drops a field fails here even when the round trips still pass.
#include "support/catch.hpp"

#include "cudyn/share/ipc_event.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/share/pool_sharing.hpp"

#include "core/wire_format.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace {

// Little-endian bytes as the records' layout comment in src/core/wire_format.hpp
// describes them: a 16-byte header (magic, u16 version 1, u16 length,
// u32 reserved), then the fields.
class Bytes {
public:
    Bytes(const char* magic, std::uint16_t length) {
        for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<std::uint8_t>(magic[i]));
        integer(1, 2);
        integer(length, 2);
        integer(0, 4);
    }
    Bytes& u32(std::uint32_t value) { return integer(value, 4); }
    Bytes& zero_handle() {
        bytes_.insert(bytes_.end(), 64, 0);
        return *this;
    }
    Bytes& u64(std::uint64_t value) { return integer(value, 8); }
    Bytes& handle(std::uint8_t first) {
        for (int i = 0; i < 64; ++i) bytes_.push_back(static_cast<std::uint8_t>(first + i));
        return *this;
    }
    const std::vector<std::uint8_t>& get() const { return bytes_; }

private:
    Bytes& integer(std::uint64_t value, int width) {
        for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
        return *this;
    }
    std::vector<std::uint8_t> bytes_;
};

// A record whose members are narrower than their wire fields, as a device
// ordinal (int) in a u64 field: the reader refuses what a member cannot hold.
struct Narrow {
    static constexpr std::size_t kSerializedSize = 16 + 8 + 4 + 2;
    enum class Kind : std::uint8_t { First, Second };
    std::int32_t device = 0;
    std::uint16_t count = 0;
    Kind kind = Kind::First;
};

template <typename Array>
std::vector<std::uint8_t> as_vector(const Array& array) {
    return std::vector<std::uint8_t>(array.begin(), array.end());
}

}  // namespace

template <>
struct cudyn::detail::WireLayout<Narrow> {
    static constexpr char kMagic[9] = "CUDYNNAR";
    static constexpr const char* kName = "Narrow";
    template <typename Wire, typename Record>
    static constexpr void fields(Wire& wire, Record& record) {
        wire.u64(record.device);
        wire.u32(record.count);
        wire.u16(record.kind);
    }
};

TEST_CASE("a wire field read into a narrower member: a value the member holds is read, one it cannot is refused",
          "[unit][wire]") {
    const auto read = [](std::uint64_t device, std::uint32_t count, std::uint16_t kind) {
        Bytes wire("CUDYNNAR", Narrow::kSerializedSize);
        wire.u64(device).u32(count);
        std::vector<std::uint8_t> bytes = wire.get();
        bytes.push_back(static_cast<std::uint8_t>(kind));
        bytes.push_back(static_cast<std::uint8_t>(kind >> 8));
        Narrow record;
        auto parsed = cudyn::detail::read_record(bytes.data(), bytes.size(), record);
        return parsed ? cudyn::Result<Narrow>(record) : cudyn::Result<Narrow>(parsed.error());
    };
    // What the writer writes for any value the members hold comes back.
    Narrow sent;
    sent.device = -1;
    sent.count = 65535;
    sent.kind = Narrow::Kind::Second;
    const auto written = cudyn::detail::write_record(sent);
    Narrow back;
    REQUIRE(cudyn::detail::read_record(written.data(), written.size(), back).has_value());
    CHECK(back.device == -1);
    CHECK(back.count == 65535);
    CHECK(back.kind == Narrow::Kind::Second);
    const auto largest = read(0x7fffffff, 0, 255);
    REQUIRE(largest.has_value());
    CHECK(largest->device == 0x7fffffff);
    const auto smallest = read(static_cast<std::uint64_t>(std::int64_t{-0x7fffffff} - 1), 0, 0);
    REQUIRE(smallest.has_value());
    CHECK(smallest->device == -0x7fffffff - 1);

    // Past them: refused, never cut (device 2^40 would read as device 0).
    for (const auto& refused : {read(std::uint64_t{1} << 40, 0, 0), read(0x80000000u, 0, 0),
                                read(static_cast<std::uint64_t>(std::int64_t{-0x7fffffff} - 2), 0, 0),
                                read(0, 65536, 0), read(0, 0, 256)}) {
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error().code == cudyn::ErrorCode::InvalidArgument);
        CHECK(refused.error().message == "Narrow: an integer field holds a value outside the range of what it describes");
    }
}

TEST_CASE("IpcMemoryDescriptor's wire bytes: header, pid, token, allocation size, offset, size, handle",
          "[unit][wire]") {
    Bytes wire("CUDYNIPM", 120);
    wire.u64(4242).u64(0x1122334455667788u).u64(1 << 20).u64(4096).u64(8192).handle(7);
    REQUIRE(wire.get().size() == cudyn::IpcMemoryDescriptor::kSerializedSize);
    auto descriptor = cudyn::IpcMemoryDescriptor::from_bytes(wire.get().data(), wire.get().size());
    REQUIRE(descriptor.has_value());
    CHECK(descriptor->exporter_pid() == 4242);
    CHECK(descriptor->allocation_size_bytes() == (1u << 20));
    CHECK(descriptor->offset_bytes() == 4096);
    CHECK(descriptor->size_bytes() == 8192);
    CHECK(descriptor->handle().to_bytes()[0] == 7);
    CHECK(descriptor->handle().to_bytes()[63] == 7 + 63);
    CHECK(as_vector(descriptor->to_bytes()) == wire.get());
}

TEST_CASE("IpcEventDescriptor's wire bytes: header, pid, token, handle", "[unit][wire]") {
    Bytes wire("CUDYNIPE", 96);
    wire.u64(99).u64(5).handle(1);
    REQUIRE(wire.get().size() == cudyn::IpcEventDescriptor::kSerializedSize);
    auto descriptor = cudyn::IpcEventDescriptor::from_bytes(wire.get().data(), wire.get().size());
    REQUIRE(descriptor.has_value());
    CHECK(descriptor->exporter_pid() == 99);
    CHECK(descriptor->handle().to_bytes()[10] == 11);
    CHECK(as_vector(descriptor->to_bytes()) == wire.get());
}

TEST_CASE("PhysicalMemoryInfo's wire bytes: header, size, granularity, handle type, 4 reserved", "[unit][wire]") {
    Bytes wire("CUDYNSHM", 40);
    wire.u64(4 << 20).u64(2 << 20).u32(static_cast<std::uint32_t>(cudyn::HandleType::PosixFileDescriptor)).u32(0);
    REQUIRE(wire.get().size() == cudyn::PhysicalMemoryInfo::kSerializedSize);
    auto info = cudyn::PhysicalMemoryInfo::from_bytes(wire.get().data(), wire.get().size());
    REQUIRE(info.has_value());
    CHECK(info->size_bytes == (4u << 20));
    CHECK(info->granularity == (2u << 20));
    CHECK(info->handle_type == cudyn::HandleType::PosixFileDescriptor);
    CHECK(as_vector(info->to_bytes()) == wire.get());
}

TEST_CASE("MemoryFabricDescriptor's wire bytes: header, size, granularity, handle", "[unit][wire]") {
    Bytes wire("CUDYNFAB", 96);
    wire.u64(2 << 20).u64(2 << 20).handle(3);
    REQUIRE(wire.get().size() == cudyn::MemoryFabricDescriptor::kSerializedSize);
    auto descriptor = cudyn::MemoryFabricDescriptor::from_bytes(wire.get().data(), wire.get().size());
    REQUIRE(descriptor.has_value());
    CHECK(descriptor->info().size_bytes == (2u << 20));
    CHECK(descriptor->info().handle_type == cudyn::HandleType::Fabric);
    CHECK(as_vector(descriptor->to_bytes()) == wire.get());
}

TEST_CASE("a record with another version or length is refused, naming it", "[unit][wire]") {
    Bytes wire("CUDYNIPE", 96);
    wire.u64(99).u64(5).handle(1);
    std::vector<std::uint8_t> bytes = wire.get();
    bytes[8] = 2;  // version 2
    auto newer = cudyn::IpcEventDescriptor::from_bytes(bytes.data(), bytes.size());
    REQUIRE_FALSE(newer.has_value());
    CHECK(newer.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(newer.error().message.find("version") != std::string::npos);
    auto shorter = cudyn::IpcEventDescriptor::from_bytes(bytes.data(), bytes.size() - 1);
    REQUIRE_FALSE(shorter.has_value());
    CHECK(shorter.error().code == cudyn::ErrorCode::InvalidArgument);
}

TEST_CASE("PoolPointerDescriptor's wire bytes: header, pid, token, pool id, allocation size, offset, size, handle",
          "[unit][wire]") {
    Bytes wire("CUDYNPPT", 128);
    wire.u64(77).u64(0x55).u64(0x7f0000001000u).u64(1 << 20).u64(256).u64(4096).handle(9);
    REQUIRE(wire.get().size() == cudyn::PoolPointerDescriptor::kSerializedSize);
    auto descriptor = cudyn::PoolPointerDescriptor::from_bytes(wire.get().data(), wire.get().size());
    REQUIRE(descriptor.has_value());
    CHECK(descriptor->origin() == cudyn::PoolOrigin{77, 0x55, 0x7f0000001000u});
    CHECK(descriptor->allocation_size_bytes() == (1u << 20));
    CHECK(descriptor->offset_bytes() == 256);
    CHECK(descriptor->size_bytes() == 4096);
    CHECK(descriptor->handle().to_bytes()[0] == 9);
    CHECK(as_vector(descriptor->to_bytes()) == wire.get());
}

TEST_CASE("PoolInfo's and PoolFabricDescriptor's wire bytes: header, pid, token, pool id, device, 4 reserved "
          "(then the handle)",
          "[unit][wire]") {
    Bytes info("CUDYNPLS", 48);
    info.u64(12).u64(34).u64(56).u32(1).u32(0);
    REQUIRE(info.get().size() == cudyn::PoolInfo::kSerializedSize);
    auto parsed = cudyn::PoolInfo::from_bytes(info.get().data(), info.get().size());
    REQUIRE(parsed.has_value());
    CHECK(parsed->origin == cudyn::PoolOrigin{12, 34, 56});
    CHECK(parsed->device == 1);
    CHECK(as_vector(parsed->to_bytes()) == info.get());

    Bytes fabric("CUDYNPLF", 112);
    fabric.u64(12).u64(34).u64(56).u32(1).u32(0).handle(5);
    REQUIRE(fabric.get().size() == cudyn::PoolFabricDescriptor::kSerializedSize);
    auto descriptor = cudyn::PoolFabricDescriptor::from_bytes(fabric.get().data(), fabric.get().size());
    REQUIRE(descriptor.has_value());
    CHECK(descriptor->info().origin == cudyn::PoolOrigin{12, 34, 56});
    CHECK(descriptor->handle().to_bytes()[1] == 6);
    CHECK(as_vector(descriptor->to_bytes()) == fabric.get());
}

TEST_CASE("every record with a handle refuses an all-zero one, and every record with an exporter a zero pid or "
          "token, naming the field",
          "[unit][wire]") {
    const auto refused = [](auto parsed, const std::string& record, const std::string& field) {
        REQUIRE_FALSE(parsed.has_value());
        CHECK(parsed.error().code == cudyn::ErrorCode::InvalidArgument);
        CHECK(parsed.error().message == record + ": " + field);
    };
    Bytes memory("CUDYNIPM", 120);
    memory.u64(4242).u64(1).u64(1 << 20).u64(0).u64(64).zero_handle();
    refused(cudyn::IpcMemoryDescriptor::from_bytes(memory.get().data(), memory.get().size()), "IpcMemoryDescriptor",
            "the handle is all zero");
    Bytes event("CUDYNIPE", 96);
    event.u64(99).u64(5).zero_handle();
    refused(cudyn::IpcEventDescriptor::from_bytes(event.get().data(), event.get().size()), "IpcEventDescriptor",
            "the handle is all zero");
    Bytes fabric("CUDYNFAB", 96);
    fabric.u64(2 << 20).u64(2 << 20).zero_handle();
    refused(cudyn::MemoryFabricDescriptor::from_bytes(fabric.get().data(), fabric.get().size()),
            "MemoryFabricDescriptor", "the handle is all zero");
    Bytes pool("CUDYNPLF", 112);
    pool.u64(12).u64(34).u64(56).u32(0).u32(0).zero_handle();
    refused(cudyn::PoolFabricDescriptor::from_bytes(pool.get().data(), pool.get().size()), "PoolFabricDescriptor",
            "the handle is all zero");
    Bytes pointer("CUDYNPPT", 128);
    pointer.u64(77).u64(0x55).u64(0x1000).u64(1 << 20).u64(0).u64(4096).zero_handle();
    refused(cudyn::PoolPointerDescriptor::from_bytes(pointer.get().data(), pointer.get().size()),
            "PoolPointerDescriptor", "the handle is all zero");

    Bytes no_token("CUDYNIPE", 96);
    no_token.u64(99).u64(0).handle(1);
    refused(cudyn::IpcEventDescriptor::from_bytes(no_token.get().data(), no_token.get().size()), "IpcEventDescriptor",
            "exporter token is 0");
    Bytes no_pid("CUDYNIPM", 120);
    no_pid.u64(0).u64(1).u64(1 << 20).u64(0).u64(64).handle(7);
    refused(cudyn::IpcMemoryDescriptor::from_bytes(no_pid.get().data(), no_pid.get().size()), "IpcMemoryDescriptor",
            "exporter process id is 0");
}
