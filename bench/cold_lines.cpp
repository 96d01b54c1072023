// cudyn-cold-lines: the stream-ordered pool pair with the data caches emptied
// before the allocation and before the free, as a real driver's call leaves
// them, so that every line the pair reads or writes after it counts.
// Run under cachegrind by scripts/cold_lines.sh, which subtracts two runs
// of different lengths: instructions and first-level data misses per pair,
// raw and cudyn, deterministic where timings on a shared machine are not.
//
//   cudyn-cold-lines PAIRS raw|cudyn     (against the null driver)
#include "cudyn/cudyn.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr std::size_t kBytes = std::size_t(1) << 20;

// Larger than any first-level data cache: one write a line pushes out all
// the pair touched before. Not inlined, so cachegrind reports it apart.
std::vector<char> sweep(std::size_t(8) << 20);
__attribute__((noinline)) void empty_data_caches() {
    for (std::size_t i = 0; i < sweep.size(); i += 64) sweep[i] = static_cast<char>(sweep[i] + 1);
}

__attribute__((noinline)) int raw_pairs(const cudyn::DriverTable& cu, CUmemoryPool pool, CUstream stream, int n) {
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
        empty_data_caches();
        CUdeviceptr pointer = 0;
        wrong += cu.cuMemAllocFromPoolAsync_v11020(&pointer, kBytes, pool, stream) != CUDA_SUCCESS;
        __asm__ __volatile__("" : : "r"(pointer) : "memory");
        empty_data_caches();
        wrong += cu.cuMemFreeAsync_v11020(pointer, stream) != CUDA_SUCCESS;
    }
    return wrong;
}

__attribute__((noinline)) int cudyn_pairs(const cudyn::MemoryPool& pool, const cudyn::Stream& stream, int n) {
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
        empty_data_caches();
        auto buffer = cudyn::StreamOrderedBuffer<std::byte>::allocate(pool, kBytes, stream);
        wrong += !buffer.has_value();
        if (buffer) __asm__ __volatile__("" : : "r"(buffer->device_address()) : "memory");
        empty_data_caches();
    }  // the free: the buffer's destructor
    return wrong;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3 || (std::strcmp(argv[2], "raw") != 0 && std::strcmp(argv[2], "cudyn") != 0)) {
        std::fprintf(stderr, "usage: cudyn-cold-lines PAIRS raw|cudyn\n");
        return 2;
    }
    const int pairs = std::atoi(argv[1]);
    const bool raw = std::strcmp(argv[2], "raw") == 0;
    auto device = cudyn::Device::get(0);
    if (!device) return std::fprintf(stderr, "%s\n", device.error().describe().c_str()), 1;
    auto context = cudyn::PrimaryContext::activate(*device);
    auto pool = cudyn::MemoryPool::create(cudyn::PoolProperties::device(0));
    auto stream = cudyn::Stream::create();
    if (!context || !pool || !stream) return std::fprintf(stderr, "setup failed\n"), 1;
    const cudyn::DriverTable& cu = *cudyn::detail::usable_driver();
    // Both sides once first: the thread's first ledger entry and the
    // driver's first answers are not what is counted.
    int wrong = raw_pairs(cu, pool->handle(), stream->handle(), 2) + cudyn_pairs(*pool, *stream, 2);
    wrong += raw ? raw_pairs(cu, pool->handle(), stream->handle(), pairs) : cudyn_pairs(*pool, *stream, pairs);
    if (wrong != 0) std::fprintf(stderr, "%d calls failed\n", wrong);
    return wrong != 0;
}
