// cudyn — 2D and 3D copies between PitchedSpans: a box of `extent` (bytes
// wide, rows high, layers deep) from a place in the source to a place in the
// destination, in any direction (host or device either side).
//
// copy_2d is cuMemcpy2D (one layer), copy_3d cuMemcpy3D. With a stream last
// they are queued on it (the Async entries); without, synchronous: they
// return once the device has done the copy, as every cudyn call without a
// stream does. Checked before any driver call (InvalidArgument naming what
// was wrong): empty spans, a zero extent, a box that runs past either span
// (offset + extent beyond width, height or depth, overflow included), a
// read-only host destination, a 2D copy of more than one layer. Overlapping
// source and destination boxes are not detected: the copy is memcpy, not
// memmove, and their bytes come out undefined.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/pitched_span.hpp"

#include <cstddef>

namespace cudyn {

struct Extent3D {
    std::size_t width_bytes = 0;
    std::size_t height = 1;  // rows
    std::size_t depth = 1;   // layers
};

struct Offset3D {
    std::size_t x_bytes = 0;
    std::size_t y = 0;  // row
    std::size_t z = 0;  // layer
};

struct PitchedCopy {
    PitchedSpan destination;
    Offset3D destination_offset;
    PitchedSpan source;
    Offset3D source_offset;
    Extent3D extent;
};

Result<void> copy_2d(const PitchedCopy& copy);
Result<void> copy_2d(const PitchedCopy& copy, StreamRef stream);
Result<void> copy_3d(const PitchedCopy& copy);
Result<void> copy_3d(const PitchedCopy& copy, StreamRef stream);

}  // namespace cudyn
