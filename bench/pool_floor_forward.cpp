// cudyn-pool-floor's forwarding library: the pool pair's two driver calls,
// each forwarded through a function of a shared library of its own and
// nothing else, the least any wrapper linked as cudyn is costs.
#include "cudyn/loader/driver_table.hpp"

extern "C" {

__attribute__((visibility("default"), noinline)) CUresult cudyn_floor_allocate(const cudyn::DriverTable* table,
                                                                               CUdeviceptr* address, size_t bytes,
                                                                               CUmemoryPool pool, CUstream stream) {
    return table->cuMemAllocFromPoolAsync_v11020(address, bytes, pool, stream);
}

__attribute__((visibility("default"), noinline)) CUresult cudyn_floor_free(const cudyn::DriverTable* table,
                                                                           CUdeviceptr address, CUstream stream) {
    return table->cuMemFreeAsync_v11020(address, stream);
}

}  // extern "C"
