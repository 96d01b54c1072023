// cudyn — what a plan (PrefetchPlan, CopyPlan) says when it issues one driver
// call per item and one of them fails part-way; private to src/.
#pragma once

#include "cudyn/error.hpp"

#include <cstddef>
#include <string>

namespace cudyn::detail {

// An item once issued cannot be taken back (a prefetch, a copy on a stream),
// so the error tells how many went out before the failure:
// " (copy 3 of 8, index 2, failed; the 2 before it were issued)".
inline void note_failed_step(Error& error, const char* noun, std::size_t index, std::size_t count) {
    std::string issued;
    if (index == 0)
        issued = "nothing was issued";
    else if (index == 1)
        issued = "the one before it was issued";
    else
        issued = "the " + std::to_string(index) + " before it were issued";
    error.message += " (" + std::string(noun) + " " + std::to_string(index + 1) + " of " + std::to_string(count) +
                     ", index " + std::to_string(index) + ", failed; " + issued + ")";
}

}  // namespace cudyn::detail
