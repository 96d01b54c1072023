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
// Records cross process boundaries, so parsing trusts nothing: the magic,
// version and length are checked before a field is read, and a failure names
// the record and what was wrong.
#pragma once

#include "cudyn/result.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cudyn::detail {

inline constexpr std::size_t kWireHeaderSize = 16;
inline constexpr std::uint16_t kWireVersion = 1;

// Writes fields in order into a caller-sized buffer.
class WireWriter {
public:
    explicit WireWriter(std::uint8_t* out) noexcept : out_(out) {}

    void header(const char (&magic)[9], std::size_t length) noexcept {
        bytes(magic, 8);
        u16(kWireVersion);
        u16(static_cast<std::uint16_t>(length));
        u32(0);
    }
    void u16(std::uint16_t value) noexcept { little_endian(value, 2); }
    void u32(std::uint32_t value) noexcept { little_endian(value, 4); }
    void u64(std::uint64_t value) noexcept { little_endian(value, 8); }
    void bytes(const void* data, std::size_t size) noexcept {
        std::memcpy(out_ + at_, data, size);
        at_ += size;
    }
    std::size_t written() const noexcept { return at_; }

private:
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
        const std::string name(what);
        if (in_ == nullptr) return Error::invalid_argument(name + ": null data");
        if (size_ < kWireHeaderSize)
            return Error::invalid_argument(name + ": " + std::to_string(size_) + " bytes is shorter than its " +
                                           std::to_string(kWireHeaderSize) + "-byte header");
        if (std::memcmp(in_, magic, 8) != 0)
            return Error::invalid_argument(name + ": wrong magic (not a " + std::string(magic, 8) + " record)");
        at_ = 8;
        const std::uint16_t version = u16();
        if (version != kWireVersion)
            return Error::invalid_argument(name + ": version " + std::to_string(version) + ", this cudyn reads " +
                                           std::to_string(kWireVersion));
        const std::uint16_t stated = u16();
        (void)u32();  // reserved
        if (stated != length || size_ != length)
            return Error::invalid_argument(name + ": length field says " + std::to_string(stated) + " bytes, " +
                                           std::to_string(size_) + " were given, version " +
                                           std::to_string(kWireVersion) + " records are " + std::to_string(length));
        return ok();
    }

    std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(little_endian(2)); }
    std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(little_endian(4)); }
    std::uint64_t u64() noexcept { return little_endian(8); }
    void bytes(void* out, std::size_t size) noexcept {
        std::memcpy(out, in_ + at_, size);
        at_ += size;
    }

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

}  // namespace cudyn::detail
