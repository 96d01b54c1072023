// cudyn — private to the pool module.
#pragma once

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/core/location.hpp"
#include "cudyn/pool/memory_pool.hpp"

#include <cuda.h>


namespace cudyn::detail {

// The pool a pointer came from (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), with the
// handle types its memory reports (CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES),
// so that export_pool_fd / export_pool_pointer can share it. Not owned: it is
// never destroyed through this object.
MemoryPool borrowed_pool(CUmemoryPool pool, const Location& location, HandleType types);

}  // namespace cudyn::detail
