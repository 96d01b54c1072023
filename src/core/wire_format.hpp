// cudyn — the byte layout shared by every serialisable IPC record (memory and
// event descriptors, shareable-memory metadata, channel frames). Not installed.
//
// A record is a 16-byte header, then its fields, all little-endian:
//
//   magic[8]  what the record is ("CUDYNIPM", ...)
//   u16       version (1)
//   u16       length of the whole record in bytes
//   u32       reserved (0)
//
// Each record states its fields once, in a WireLayout specialisation next to
// the record's code:
//
//     template <> struct WireLayout<Thing> {
//         static constexpr char kMagic[9] = "CUDYNTHG";
//         static constexpr const char* kName = "Thing";  // names it in parse errors
//         template <typename Wire, typename Record>      // Record: Thing or const Thing
//         static constexpr void fields(Wire& wire, Record& thing) {
//             wire.u64(thing.size);
//             wire.handle(thing.handle);
//             wire.reserved(4);
//         }
//     };
//
// write_record() walks fields() with a WireWriter, read_record() with a
// WireReader, and a WireSize walk checks at compile time that the fields fill
// Thing::kSerializedSize: writer and reader cannot disagree about the order,
// the widths or the length, because there is only one list.
//
// Records cross process boundaries, so parsing trusts nothing: the magic,
// version and length are checked before a field is read, and a failure names
// the record and what was wrong. What the values must satisfy is the
// record's own from_bytes() business, after read_record().
#pragma once

#include "cudyn/core/result.hpp"
#include "core/internal.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace cudyn::detail {

inline constexpr std::size_t kWireHeaderSize = 16;
inline constexpr std::uint16_t kWireVersion = 1;

// Specialised once per record (see above); public headers befriend the
// specialisation of a record with private fields.
template <typename Record>
struct WireLayout;

// Integers and enums take the width the layout names; a member wider than
// that would be cut silently, so it does not compile.
template <typename T, std::size_t Width>
constexpr void check_wire_width() noexcept {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>, "a wire integer field must be an integer or an enum");
    static_assert(sizeof(T) <= Width, "the member is wider than its wire field");
}

// Writes fields in order into a caller-sized buffer.
class WireWriter {
public:
    explicit WireWriter(std::uint8_t* out) noexcept : out_(out) {}

    void header(const char (&magic)[9], std::size_t length) noexcept {
        bytes(magic, 8);
        u16(kWireVersion);
        u16(static_cast<std::uint16_t>(length));
        reserved(4);
    }
    template <typename T>
    void u16(T value) noexcept {
        check_wire_width<T, 2>();
        little_endian(static_cast<std::uint64_t>(value), 2);
    }
    template <typename T>
    void u32(T value) noexcept {
        check_wire_width<T, 4>();
        little_endian(static_cast<std::uint64_t>(value), 4);
    }
    template <typename T>
    void u64(T value) noexcept {
        check_wire_width<T, 8>();
        little_endian(static_cast<std::uint64_t>(value), 8);
    }
    // A driver handle's opaque bytes (IpcHandle: kSize, to_bytes()).
    template <typename Handle>
    void handle(const Handle& value) noexcept {
        bytes(value.to_bytes().data(), Handle::kSize);
    }
    void reserved(std::size_t size) noexcept {
        std::memset(out_ + at_, 0, size);
        at_ += size;
    }

private:
    void bytes(const void* data, std::size_t size) noexcept {
        std::memcpy(out_ + at_, data, size);
        at_ += size;
    }
    void little_endian(std::uint64_t value, int width) noexcept {
        for (int i = 0; i < width; ++i) out_[at_++] = static_cast<std::uint8_t>(value >> (8 * i));
    }
    std::uint8_t* out_;
    std::size_t at_ = 0;
};

// Reads fields in order from a record whose header check() accepted.
class WireReader {
public:
    WireReader(const void* data, std::size_t size) noexcept
        : in_(static_cast<const std::uint8_t*>(data)), size_(size) {}

    // InvalidArgument "<what>: ..." unless the bytes hold exactly one record
    // with this magic, the supported version and `length` bytes. Leaves the
    // reader after the header.
    Result<void> check(const char (&magic)[9], std::size_t length, const char* what) {
        const Operation record(what);
        if (in_ == nullptr) return record.invalid("null data");
        if (size_ < kWireHeaderSize)
            return record.invalid(std::to_string(size_) + " bytes is shorter than its " +
                                  std::to_string(kWireHeaderSize) + "-byte header");
        if (std::memcmp(in_, magic, 8) != 0)
            return record.invalid("wrong magic (not a " + std::string(magic, 8) + " record)");
        at_ = 8;
        std::uint16_t version = 0;
        u16(version);
        if (version != kWireVersion)
            return record.invalid("version " + std::to_string(version) + ", this cudyn reads " +
                                  std::to_string(kWireVersion));
        std::uint16_t stated = 0;
        u16(stated);
        reserved(4);
        if (stated != length || size_ != length)
            return record.invalid("length field says " + std::to_string(stated) + " bytes, " + std::to_string(size_) +
                                  " were given, version " + std::to_string(kWireVersion) + " records are " +
                                  std::to_string(length));
        return ok();
    }

    template <typename T>
    void u16(T& value) noexcept {
        check_wire_width<T, 2>();
        value = static_cast<T>(little_endian(2));
    }
    template <typename T>
    void u32(T& value) noexcept {
        check_wire_width<T, 4>();
        value = static_cast<T>(little_endian(4));
    }
    template <typename T>
    void u64(T& value) noexcept {
        check_wire_width<T, 8>();
        value = static_cast<T>(little_endian(8));
    }
    template <typename Handle>
    void handle(Handle& value) noexcept {
        typename Handle::Bytes raw{};
        std::memcpy(raw.data(), in_ + at_, raw.size());
        at_ += raw.size();
        value = Handle::from_bytes(raw);
    }
    // Reserved bytes are not checked: a later version may give them a meaning
    // that this one can ignore.
    void reserved(std::size_t size) noexcept { at_ += size; }

private:
    std::uint64_t little_endian(int width) noexcept {
        std::uint64_t value = 0;
        for (int i = 0; i < width; ++i) value |= static_cast<std::uint64_t>(in_[at_++]) << (8 * i);
        return value;
    }
    const std::uint8_t* in_;
    std::size_t size_;
    std::size_t at_ = 0;
};

// Adds up a layout's widths without touching a record, for the static_assert below.
class WireSize {
public:
    template <typename T>
    constexpr void u16(const T&) noexcept { size_ += 2; }
    template <typename T>
    constexpr void u32(const T&) noexcept { size_ += 4; }
    template <typename T>
    constexpr void u64(const T&) noexcept { size_ += 8; }
    template <typename Handle>
    constexpr void handle(const Handle&) noexcept { size_ += Handle::kSize; }
    constexpr void reserved(std::size_t size) noexcept { size_ += size; }
    constexpr std::size_t size() const noexcept { return size_; }

private:
    std::size_t size_ = kWireHeaderSize;
};

// Gives WireSize a Record to name the members of without constructing one
// (the descriptors' constructors are private): naming an inactive union
// member is allowed in a constant expression, reading it is not, and
// WireSize never reads.
template <typename Record>
union WireProbe {
    static_assert(std::is_trivially_destructible_v<Record>, "a wire record is a plain value");
    constexpr WireProbe() noexcept : none() {}
    char none;
    Record record;
};

template <typename Record>
constexpr std::size_t wire_size() noexcept {
    WireProbe<Record> probe;
    WireSize size;
    WireLayout<Record>::fields(size, probe.record);
    return size.size();
}

template <typename Record>
constexpr void check_layout_size() noexcept {
    static_assert(wire_size<Record>() == Record::kSerializedSize,
                  "the WireLayout's fields do not fill the record's kSerializedSize");
    static_assert(Record::kSerializedSize <= 0xffff, "the header's length field is 16 bits");
}

// The record as bytes: header, then fields() in order.
template <typename Record>
std::array<std::uint8_t, Record::kSerializedSize> write_record(const Record& record) noexcept {
    check_layout_size<Record>();
    std::array<std::uint8_t, Record::kSerializedSize> bytes{};
    WireWriter out(bytes.data());
    out.header(WireLayout<Record>::kMagic, Record::kSerializedSize);
    WireLayout<Record>::fields(out, record);
    return bytes;
}

// Fills `record` from bytes that check() accepts (InvalidArgument naming
// WireLayout<Record>::kName otherwise; `record` is then untouched).
template <typename Record>
Result<void> read_record(const void* data, std::size_t size, Record& record) {
    check_layout_size<Record>();
    WireReader in(data, size);
    CUDYN_TRY(in.check(WireLayout<Record>::kMagic, Record::kSerializedSize, WireLayout<Record>::kName));
    WireLayout<Record>::fields(in, record);
    return ok();
}

}  // namespace cudyn::detail
