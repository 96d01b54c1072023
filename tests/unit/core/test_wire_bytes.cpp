// The bytes every IPC record puts on the wire, pinned: each record is read
// from bytes built here by hand, field by field, and written back to the same
// bytes. Two processes built from different versions of cudyn must agree on
// this layout, so a change to a record's WireLayout that moves, widens or
// drops a field fails here even when the round trips still pass.
#include "support/catch.hpp"

#include "cudyn/share/ipc_event.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace {

// Little-endian bytes as the records' layout comment in src/wire_format.hpp
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

template <typename Array>
std::vector<std::uint8_t> as_vector(const Array& array) {
    return std::vector<std::uint8_t>(array.begin(), array.end());
}

}  // namespace

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
