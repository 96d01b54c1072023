// cudyn — the shared record of one cuMemAddressReserve (address_range.cpp), owned by
// AddressRange and every MappedRange in it; private to src/.
#pragma once

#include "cudyn/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <map>
#include <mutex>

namespace cudyn::detail {

// One cuMemAddressReserve. Freed by the destructor when address is set, i.e.
// when the last owner (AddressRange or MappedRange) lets go.
struct Reservation {
    CUdeviceptr address = 0;
    std::size_t size = 0;

    Reservation() = default;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();  // gives back what is left, silently
    // cuMemAddressFree now; on success there is nothing left to free.
    Result<void> give_back();

    // Records [offset, offset + bytes) as mapped; false when it overlaps a
    // live mapping (and `*clash` gets that mapping's offset).
    bool claim(std::size_t offset, std::size_t bytes, std::size_t* clash);
    void unclaim(std::size_t offset);
    std::size_t mapping_count();

private:
    std::mutex mutex_;
    std::map<std::size_t, std::size_t> mapped_;  // offset -> bytes of each live mapping
};

}  // namespace cudyn::detail
