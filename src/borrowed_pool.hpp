// cudyn — a MemoryPool naming a pool this process made but the caller holds no
// owner of (pool_sharing.cpp); private to src/.
#pragma once

#include "cudyn/allocation_properties.hpp"
#include "cudyn/location.hpp"
#include "cudyn/memory_pool.hpp"

#include <cuda.h>

namespace cudyn::detail {

// The pool a pointer came from (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), with the
// handle types its memory reports (CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES),
// so that export_pool / export_pool_pointer can share it. Not owned: it is
// never destroyed through this object.
MemoryPool borrowed_pool(CUmemoryPool pool, const Location& location, HandleType types);

}  // namespace cudyn::detail
