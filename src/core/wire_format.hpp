// cudyn — the byte layout shared by every serialisable record that travels
// between processes (memory, event and pool descriptors, their metadata,
// channel frames), and RecordAccess, the library's way into records' private
// fields. Not installed.
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
//             auto& f = RecordAccess::fields(thing);
//             wire.exporter(f.exporter);
//             wire.u64(f.size);
//             wire.handle(f.handle);
//             wire.reserved(4);
//         }
//         static Result<void> validate(const Thing& thing);  // optional: what the values must satisfy
//     };
//
// write_record() walks fields() with a WireWriter, parse_record() with a
// WireReader, and a WireSize walk checks at compile time that the fields fill
// Thing::kSerializedSize: writer and reader cannot disagree about the order,
// the widths or the length, because there is only one list.
//
// Records cross process boundaries, so parsing trusts nothing: the magic,
// version and length are checked before a field is read; an exporter
// identity of 0 and an all-zero driver handle are refused by the reader
// itself, so no record can forget them; then the layout's validate(). A
// failure is InvalidArgument naming the record and what was wrong.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/record_access.hpp"

#include "core/internal.hpp"
#include "core/process_identity.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace cudyn::detail {

// The one door into records' private parts (record_access.hpp). A record
// keeps what travels in one private aggregate, `fields_`, and has a private
// default constructor (its blank form); an owner of imported memory
// (ImportedAllocation) keeps private constructors for make().
struct RecordAccess {
    // T from one of its private constructors: a blank record when no arguments.
    template <typename T, typename... Args>
    static T make(Args&&... args) {
        return T(std::forward<Args>(args)...);
    }
    // For a public blank constructor that a Result calls in place.
    static RecordKey key() noexcept { return RecordKey(); }

    template <typename Record>
    static constexpr auto& fields(Record& record) noexcept {
        return record.fields_;
    }
    template <typename Record>
    static constexpr const auto& fields(const Record& record) noexcept {
        return record.fields_;
    }

    static ExporterIdentity exporter(std::uint64_t pid, std::uint64_t token) noexcept {
        ExporterIdentity identity;
        identity.pid_ = pid;
        identity.token_ = token;
        return identity;
    }
    // This process, as exporter of what it exports now.
    static ExporterIdentity this_exporter() noexcept {
        const ProcessIdentity self = this_process();
        return exporter(self.pid, self.token);
    }
};

inline constexpr std::size_t kWireHeaderSize = 16;
inline constexpr std::uint16_t kWireVersion = 1;

// Specialised once per record (see above), in the record's own .cpp.
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
    // Who exported the record: u64 pid, u64 token.
    void exporter(const ExporterIdentity& identity) noexcept { exporter(identity.pid(), identity.token()); }
    void exporter(std::uint64_t pid, std::uint64_t token) noexcept {
        u64(pid);
        u64(token);
    }
    // A fixed run of opaque bytes (a type with kSize and to_bytes()).
    template <typename Fixed>
    void fixed(const Fixed& value) noexcept {
        bytes(value.to_bytes().data(), Fixed::kSize);
    }
    // A driver handle (IpcHandle), the same way.
    template <typename Handle>
    void handle(const Handle& value) noexcept {
        fixed(value);
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

// Reads fields in order from a record whose header check() accepted, and
// remembers the first value no record may hold (problem()).
class WireReader {
public:
    WireReader(const void* data, std::size_t size) noexcept
        : in_(static_cast<const std::uint8_t*>(data)), size_(size) {}

    // InvalidArgument "<record>: ..." unless the bytes hold exactly one
    // record with this magic, the supported version and `length` bytes.
    // Leaves the reader after the header.
    Result<void> check(const char (&magic)[9], std::size_t length, const Operation& record) {
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
        integer(value, 2);
    }
    template <typename T>
    void u32(T& value) noexcept {
        check_wire_width<T, 4>();
        integer(value, 4);
    }
    template <typename T>
    void u64(T& value) noexcept {
        check_wire_width<T, 8>();
        integer(value, 8);
    }
    void exporter(ExporterIdentity& identity) noexcept {
        std::uint64_t pid = 0;
        std::uint64_t token = 0;
        exporter(pid, token);
        identity = RecordAccess::exporter(pid, token);
    }
    void exporter(std::uint64_t& pid, std::uint64_t& token) noexcept {
        u64(pid);
        u64(token);
        if (pid == 0) refuse("exporter process id is 0");
        if (token == 0) refuse("exporter token is 0");
    }
    template <typename Fixed>
    void fixed(Fixed& value) noexcept {
        typename Fixed::Bytes raw{};
        std::memcpy(raw.data(), in_ + at_, raw.size());
        at_ += raw.size();
        value = Fixed::from_bytes(raw);
    }
    // A driver handle: all zero bytes are no handle.
    template <typename Handle>
    void handle(Handle& value) noexcept {
        fixed(value);
        if (value == Handle()) refuse("the handle is all zero");
    }
    // Reserved bytes are not checked: a later version may give them a meaning
    // that this one can ignore.
    void reserved(std::size_t size) noexcept { at_ += size; }

    // The first refused value the fields held, or nullptr.
    const char* problem() const noexcept { return problem_; }

private:
    void refuse(const char* what) noexcept {
        if (problem_ == nullptr) problem_ = what;
    }
    // A field narrower in the record than on the wire: a value the member
    // cannot hold is refused, never cut (a device 2^40 must not read as
    // device 0). A signed member's field holds the value's two's complement
    // at the field's width, as the writer wrote it.
    template <typename T>
    void integer(T& value, int width) noexcept {
        using Member = typename std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>,
                                                   std::common_type<T>>::type;
        const std::uint64_t raw = little_endian(width);
        bool fits = true;
        if constexpr (sizeof(Member) < sizeof(std::uint64_t)) {  // a 64-bit member holds any field
            if constexpr (std::is_signed_v<Member>) {
                const int unused_bits = 64 - 8 * width;
                const auto wide = static_cast<std::int64_t>(raw << unused_bits) >> unused_bits;
                fits = wide >= std::numeric_limits<Member>::min() && wide <= std::numeric_limits<Member>::max();
            } else {
                fits = raw <= std::numeric_limits<Member>::max();
            }
        }
        if (!fits) refuse("an integer field holds a value outside the range of what it describes");
        value = static_cast<T>(raw);
    }
    std::uint64_t little_endian(int width) noexcept {
        std::uint64_t value = 0;
        for (int i = 0; i < width; ++i) value |= static_cast<std::uint64_t>(in_[at_++]) << (8 * i);
        return value;
    }
    const std::uint8_t* in_;
    std::size_t size_;
    std::size_t at_ = 0;
    const char* problem_ = nullptr;
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
    constexpr void exporter(const ExporterIdentity&) noexcept { size_ += 16; }
    constexpr void exporter(const std::uint64_t&, const std::uint64_t&) noexcept { size_ += 16; }
    template <typename Fixed>
    constexpr void fixed(const Fixed&) noexcept { size_ += Fixed::kSize; }
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

// Fills `record` from bytes that check() accepts and whose fields hold no
// refused value (InvalidArgument naming WireLayout<Record>::kName otherwise).
template <typename Record>
Result<void> read_record(const void* data, std::size_t size, Record& record) {
    check_layout_size<Record>();
    constexpr Operation kRecord{WireLayout<Record>::kName};
    WireReader in(data, size);
    CUDYN_TRY(in.check(WireLayout<Record>::kMagic, Record::kSerializedSize, kRecord));
    WireLayout<Record>::fields(in, record);
    if (in.problem() != nullptr) return kRecord.invalid(in.problem());
    return ok();
}

template <typename Layout, typename Record, typename = void>
struct HasValidate : std::false_type {};
template <typename Layout, typename Record>
struct HasValidate<Layout, Record, std::void_t<decltype(Layout::validate(std::declval<const Record&>()))>>
    : std::true_type {};

// A record's from_bytes(): read_record(), then the layout's validate() where
// it has one.
template <typename Record>
Result<Record> parse_record(const void* data, std::size_t size) {
    Record record = RecordAccess::make<Record>();
    CUDYN_TRY(read_record(data, size, record));
    if constexpr (HasValidate<WireLayout<Record>, Record>::value) CUDYN_TRY(WireLayout<Record>::validate(record));
    return record;
}

}  // namespace cudyn::detail
