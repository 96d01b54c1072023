// cudyn-pool-floor: where the stream-ordered pool pair's time over the raw
// driver goes, on a GPU. In one process, loops of the same pair (1 MiB,
// cuMemAllocFromPoolAsync + cuMemFreeAsync on one pool and stream) take
// turns in slices, each round in another order:
//
//   raw          the table's two entries called in the loop
//   forward      each call forwarded through a function of another shared
//                library (libcudyn-bench-forward): the least a wrapper costs
//   inline       cudyn's checks, the table's calls and a record on the stack,
//                written in the loop, no ledger entry
//   inline+entry the same with the ledger entry (LedgerTicket::open and close)
//   inline+row   the same with a row of this program's own, counted in the
//                loop by the ledger's owner update (detail::update_owned):
//                the row's line without the ledger's table or the ticket
//   library      cudyn's allocation and free on one StreamOrderedMemory (their
//                common cases inline): no result, no destructor
//   cudyn        StreamOrderedBuffer<std::byte>::allocate, freed by its
//                destructor
//
// It prints, per loop, the median over the rounds of (loop - raw) per pair.
// Run it in several fresh processes: the driver's pair runs at one of two
// speeds that a process mostly keeps. GPU only (device 0).
//
//   cudyn-pool-floor [ROUNDS] [PAIRS_PER_SLICE]      (default 25, 1000)
#include "cudyn/cudyn.hpp"
#include "cudyn/detail/ledger_row.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "pool_pair_loops.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" CUresult cudyn_floor_allocate(const cudyn::DriverTable*, CUdeviceptr*, size_t, CUmemoryPool, CUstream);
extern "C" CUresult cudyn_floor_free(const cudyn::DriverTable*, CUdeviceptr, CUstream);

namespace {

using cudyn::DriverTable;
using cudyn::MemoryPool;
using cudyn::Stream;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kBytes = std::size_t(1) << 20;

__attribute__((noinline)) int forward_pairs(const DriverTable& cu, CUmemoryPool pool, CUstream stream, int n) {
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
        CUdeviceptr address = 0;
        wrong += cudyn_floor_allocate(&cu, &address, kBytes, pool, stream) != CUDA_SUCCESS;
        cudyn::bench::keep_address(address);
        wrong += cudyn_floor_free(&cu, address, stream) != CUDA_SUCCESS;
    }
    return wrong;
}

// A ledger row of this program's own, counted in the loop by the ledger's
// owner update (inline+row): the row's line without the ledger's table or
// the ticket.
cudyn::detail::LedgerRow local_row;

template <bool Close>
void count_in_local_row(std::uint64_t bytes) noexcept {
    (void)cudyn::detail::update_owned<Close>(local_row, cudyn::detail::this_thread_identity(), bytes);
}

enum class Entry { None, Library, LocalRow };

// What StreamOrderedBuffer's record holds, filled on the stack.
struct Record {
    CUdeviceptr address = 0;
    std::size_t bytes = 0;
    CUstream stream = nullptr;
    CUcontext context = nullptr;
    CUcontext stream_context = nullptr;
    bool host_located = false;
    cudyn::detail::LedgerTicket ledger;
};

template <Entry entry>
__attribute__((noinline)) int inline_pairs(const MemoryPool& pool, const Stream& stream, int n) {
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
        const DriverTable* table = cudyn::detail::usable_driver();
        if (pool.empty() || stream.handle() == nullptr || table == nullptr ||
            table->cuMemAllocFromPoolAsync_v11020 == nullptr) {
            ++wrong;
            continue;
        }
        Record record;
        CUdeviceptr address = 0;
        if (table->cuMemAllocFromPoolAsync_v11020(&address, kBytes, pool.handle(), stream.handle()) != CUDA_SUCCESS) {
            ++wrong;
            continue;
        }
        record.address = address;
        record.bytes = kBytes;
        record.stream = stream.handle();
        record.context = record.stream_context = stream.context().handle();
        if (entry == Entry::Library) record.ledger.open(cudyn::MemoryKind::StreamOrdered, 0, kBytes, address);
        if (entry == Entry::LocalRow) count_in_local_row<false>(kBytes);
        __asm__ __volatile__("" : : "r"(&record) : "memory");  // the record stored, as a real one is
        wrong += table->cuMemFreeAsync_v11020(record.address, record.stream) != CUDA_SUCCESS;
        record.address = 0;
        record.ledger.close();
        if (entry == Entry::LocalRow) count_in_local_row<true>(kBytes);
    }
    return wrong;
}

__attribute__((noinline)) int library_pairs(const MemoryPool& pool, const Stream& stream, int n) {
    int wrong = 0;
    cudyn::detail::StreamOrderedMemory memory;
    for (int i = 0; i < n; ++i) {
        wrong += !cudyn::detail::StreamOrderedMemory::allocate(memory, kBytes, 1, &pool, cudyn::StreamRef(stream));
        cudyn::bench::keep_address(memory.address());
        wrong += !memory.release();
    }
    return wrong;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 25;
    const int pairs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1000;
    constexpr int kSlices = 5;
    auto device = cudyn::Device::get(0);
    if (!device) return std::fprintf(stderr, "%s\n", device.error().describe().c_str()), 1;
    auto context = cudyn::PrimaryContext::activate(*device);
    auto pool = MemoryPool::create(cudyn::PoolProperties::device(0));
    auto stream = Stream::create();
    if (!context || !pool || !stream) return std::fprintf(stderr, "setup failed\n"), 1;
    const DriverTable& cu = *cudyn::detail::usable_driver();

    local_row.owner.store(cudyn::detail::this_thread_identity());
    const char* const names[] = {"raw", "forward", "inline", "inline+entry", "inline+row", "library", "cudyn"};
    constexpr int kLoops = sizeof names / sizeof names[0];
    const auto run = [&](int loop) {
        switch (loop) {
            case 0: return static_cast<int>(cudyn::bench::raw_pool_pairs(cu, pool->handle(), stream->handle(), kBytes, pairs));
            case 1: return forward_pairs(cu, pool->handle(), stream->handle(), pairs);
            case 2: return inline_pairs<Entry::None>(*pool, *stream, pairs);
            case 3: return inline_pairs<Entry::Library>(*pool, *stream, pairs);
            case 4: return inline_pairs<Entry::LocalRow>(*pool, *stream, pairs);
            case 5: return library_pairs(*pool, *stream, pairs);
            default: return static_cast<int>(cudyn::bench::cudyn_pool_pairs(*pool, *stream, kBytes, pairs));
        }
    };
    int wrong = 0;
    for (int loop = 0; loop < kLoops; ++loop) wrong += run(loop);  // first calls, not timed
    std::vector<double> raw_ns;
    std::vector<std::vector<double>> over(kLoops);
    for (int round = 0; round < rounds; ++round) {
        double ns[kLoops] = {};
        for (int slice = 0; slice < kSlices; ++slice) {
            for (int turn = 0; turn < kLoops; ++turn) {
                const int loop = (turn + round + slice) % kLoops;
                const auto start = Clock::now();
                wrong += run(loop);
                ns[loop] += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
            }
            wrong += !stream->synchronize();
        }
        const double per_pair = 1.0 / (kSlices * pairs);
        raw_ns.push_back(ns[0] * per_pair);
        for (int loop = 1; loop < kLoops; ++loop) over[loop].push_back((ns[loop] - ns[0]) * per_pair);
    }
    std::printf("raw %.0f ns a pair", median(raw_ns));
    for (int loop = 1; loop < kLoops; ++loop) std::printf(" | %s %+.1f ns", names[loop], median(over[loop]));
    std::printf("\n");
    if (wrong != 0) std::fprintf(stderr, "%d calls failed\n", wrong);
    return wrong != 0;
}
