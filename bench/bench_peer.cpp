// cudyn-bench — two devices: peer copies through a CopyPlan against the raw
// peer call and the raw batch, and stream-ordered allocation from a pool whose
// memory device 1 may access, against the raw pool calls. Both sides copy the
// same bytes on the same stream of device 0 with peer access enabled both ways.
#include "harness.hpp"
#include "peer_fixture.hpp"
#include "pool_pairs.hpp"

#include "cudyn/device/peer_access.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::bench {

namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kPieces = 1000;
constexpr std::size_t kPiece = 4096;

// Peer access both ways (idempotent), so that copies go over the link and
// pool memory can be granted to device 1.
Result<void> enable_both_ways(const PeerFixture& f) {
    CUDYN_TRY(enable_peer_access(f.context0, f.context1));
    return enable_peer_access(f.context1, f.context0);
}

// `bytes` on each device, a stream of device 0, and a CopyPlan of `pieces`
// equal copies from device 0's buffer to device 1's, with the raw arrays of
// the same copies.
struct PeerCopy {
    Stream stream;
    DeviceBuffer<unsigned char> on_device0;
    DeviceBuffer<unsigned char> on_device1;
    CopyPlan plan;
    std::vector<CUdeviceptr> destinations, sources;
    std::vector<std::size_t> sizes;
};

Result<PeerCopy> make_peer_copy(const PeerFixture& f, std::size_t pieces, std::size_t piece_bytes) {
    CUDYN_TRY(enable_both_ways(f));
    const std::size_t bytes = pieces * piece_bytes;
    for (const PrimaryContext* context : {&f.context0, &f.context1}) {
        CUDYN_TRY_ASSIGN(const DeviceMemoryInfo memory, device_memory_info(*context));
        if (memory.free_bytes < 2 * bytes)
            return Error::invalid_argument("a device has less than twice the copy's bytes free");
    }
    CUDYN_TRY_ASSIGN(auto stream, Stream::create());  // device 0's context is current
    CUDYN_TRY_ASSIGN(auto on_device0, DeviceBuffer<unsigned char>::allocate(bytes));
    CUDYN_TRY(on_device0.fill(0x5A));
    CUDYN_TRY(f.context1.make_current());
    auto on_device1 = DeviceBuffer<unsigned char>::allocate(bytes);
    CUDYN_TRY(f.context0.make_current());  // device 0's again, as the cases expect
    if (!on_device1) return std::move(on_device1).error();
    PeerCopy made{std::move(stream), std::move(on_device0), std::move(*on_device1), CopyPlan{}, {}, {}, {}};
    made.plan.reserve(pieces);
    for (std::size_t i = 0; i < pieces; ++i) {
        CUDYN_TRY_ASSIGN(auto to, made.on_device1.device_span().subspan(i * piece_bytes, piece_bytes));
        CUDYN_TRY_ASSIGN(auto from, made.on_device0.device_span().subspan(i * piece_bytes, piece_bytes));
        CUDYN_TRY(made.plan.add(to, DeviceSpan<const unsigned char>(from)));
        made.destinations.push_back(to.device_address());
        made.sources.push_back(from.device_address());
        made.sizes.push_back(piece_bytes);
    }
    return made;
}

// One round of `copy` then a synchronize of the stream; a loop counts its
// failed rounds.
template <typename Copy>
auto rounds(const PeerCopy& p, Copy copy) {
    return [&p, copy](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            const bool copied = copy();
            wrong += copied && driver().cuStreamSynchronize_v2000(p.stream.handle()) == CUDA_SUCCESS ? 0 : 1;
        }
        return wrong;
    };
}

// The plan's copies as one raw cuMemcpyBatchAsync in the ABI `path` names.
bool raw_batch(const PeerCopy& p, CopyPlan::Path path) {
    const DriverTable& cu = driver();
    CUmemcpyAttributes attributes{};
    attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    std::size_t first = 0;
    auto* destinations = const_cast<CUdeviceptr*>(p.destinations.data());
    auto* sources = const_cast<CUdeviceptr*>(p.sources.data());
    auto* sizes = const_cast<std::size_t*>(p.sizes.data());
    if (path == CopyPlan::Path::Batch13000)
        return cu.cuMemcpyBatchAsync_v13000(destinations, sources, sizes, p.sizes.size(), &attributes, &first, 1,
                                            p.stream.handle()) == CUDA_SUCCESS;
    std::size_t failed_index = 0;
    return cu.cuMemcpyBatchAsync_v12080(destinations, sources, sizes, p.sizes.size(), &attributes, &first, 1,
                                        &failed_index, p.stream.handle()) == CUDA_SUCCESS;
}

void in_microseconds(CaseResult& result) {
    result.raw /= 1000;
    result.cudyn /= 1000;
    for (double& sample : result.raw_samples) sample /= 1000;
    for (double& sample : result.cudyn_samples) sample /= 1000;
    for (auto& [name, value] : result.extra)
        if (name != "delta_ns") value /= 1000;
    result.unit = "us/round";
}

// =============================================================================
// 1 GiB from device 0 to device 1: CopyPlan vs raw cuMemcpyPeerAsync
// =============================================================================

CaseResult plan_vs_peer_call(const Settings& settings) {
    std::string error;
    PeerFixture* f = peer_fixture(error);
    if (f == nullptr) return skipped(error);
    static std::optional<Result<PeerCopy>> made;
    if (!made) made.emplace(make_peer_copy(*f, 1, kGiB));
    if (!made->has_value()) return failed(made->error().describe());
    const PeerCopy& p = made->value();
    const CUcontext context0 = f->context0.handle();
    const CUcontext context1 = f->context1.handle();
    const auto raw = [&p, context0, context1] {
        return driver().cuMemcpyPeerAsync_v4000(p.destinations[0], context1, p.sources[0], context0, kGiB,
                                                p.stream.handle()) == CUDA_SUCCESS;
    };
    const auto plan = [&p] { return p.plan.execute(p.stream).has_value(); };
    CaseResult result = compare_loops(settings, 5, rounds(p, raw), rounds(p, plan));
    if (result.status != Status::Ok) return result;
    in_microseconds(result);
    const double gigabytes = static_cast<double>(kGiB) / 1e9;
    result.extra.push_back({"raw_GBps", gigabytes / (result.raw / 1e6)});
    result.extra.push_back({"cudyn_GBps", gigabytes / (result.cudyn / 1e6)});
    result.operation = std::string("1 GiB device 0 -> device 1 + cuStreamSynchronize: CopyPlan (") +
                       to_string(CopyPlan::path_for(p.stream)) + ") vs raw cuMemcpyPeerAsync";
    result.notes.push_back("link bandwidth reached (median round): raw " + format("%.1f", gigabytes / (result.raw / 1e6)) +
                           " GB/s, CopyPlan " + format("%.1f", gigabytes / (result.cudyn / 1e6)) + " GB/s");
    add_target_note(result, "CopyPlan vs raw peer call", 1.05);
    return result;
}

// =============================================================================
// 1,000 x 4 KiB from device 0 to device 1: CopyPlan vs one raw batch
// =============================================================================

CaseResult plan_vs_batch(const Settings& settings) {
    std::string error;
    PeerFixture* f = peer_fixture(error);
    if (f == nullptr) return skipped(error);
    static std::optional<Result<PeerCopy>> made;
    if (!made) made.emplace(make_peer_copy(*f, kPieces, kPiece));
    if (!made->has_value()) return failed(made->error().describe());
    const PeerCopy& p = made->value();
    const CopyPlan::Path path = CopyPlan::path_for(p.stream);
    if (path == CopyPlan::Path::PerCopy)
        return skipped("this driver has no cuMemcpyBatchAsync (12.8+): the plan goes copy by copy");
    const auto raw = [&p, path] { return raw_batch(p, path); };
    const auto plan = [&p] { return p.plan.execute(p.stream).has_value(); };
    CaseResult result = compare_loops(settings, 50, rounds(p, raw), rounds(p, plan));
    if (result.status != Status::Ok) return result;
    in_microseconds(result);
    result.operation = std::string("1000 x 4 KiB device 0 -> device 1 + cuStreamSynchronize: CopyPlan vs one raw "
                                   "cuMemcpyBatchAsync, ") + to_string(path);
    add_target_note(result, "CopyPlan vs raw batch", 1.05);
    return result;
}

// =============================================================================
// Stream-ordered allocation from a pool device 1 may access
// =============================================================================

// `iterations` allocate+free pairs of 1 MiB per round on one stream of
// device 0, from a pool of device 0 that keeps its memory and grants device 1
// read-write access, timed by compare_pool_pairs.
CaseResult pool_alloc_with_peer_access(const Settings& settings) {
    std::string error;
    PeerFixture* f = peer_fixture(error);
    if (f == nullptr) return skipped(error);
    if (!has_entry(&DriverTable::cuMemAllocFromPoolAsync_v11020)) return skipped("the driver has no pool entries (11.2+)");
    if (auto enabled = enable_both_ways(*f); !enabled) return failed(enabled.error().describe());
    struct PoolFixture {
        Stream stream;
        MemoryPool pool;
    };
    static std::optional<Result<PoolFixture>> made;
    if (!made) {
        made.emplace([]() -> Result<PoolFixture> {
            CUDYN_TRY_ASSIGN(auto stream, Stream::create());
            CUDYN_TRY_ASSIGN(auto pool, MemoryPool::create(PoolProperties::device(0)));
            CUDYN_TRY(pool.set_release_threshold(std::numeric_limits<std::uint64_t>::max()));
            CUDYN_TRY(pool.set_access({Location::device(1), AccessFlags::ReadWrite}));
            return PoolFixture{std::move(stream), std::move(pool)};
        }());
    }
    if (!made->has_value()) return failed(made->error().describe());
    PoolFixture& p = made->value();
    CaseResult result = compare_pool_pairs(settings, 10000, p.pool, p.stream, std::size_t{1} << 20);
    if (result.status != Status::Ok) return result;
    result.operation = "alloc+free 1 MiB in stream order from a device-0 pool with device 1 granted read-write";
    result.unit = "ns/op";
    add_target_note(result, "StreamOrderedBuffer vs raw pool path, peer access set", 1.05);
    return result;
}

const CaseRegistrar plan_vs_peer_call_case({"peer/copy-plan-1GiB",
                                            "CopyPlan::execute of one 1 GiB copy device 0 -> device 1 vs raw "
                                            "cuMemcpyPeerAsync, each round + cuStreamSynchronize (two devices)",
                                            true, plan_vs_peer_call});
const CaseRegistrar plan_vs_batch_case({"peer/copy-plan-1000x4KiB",
                                        "CopyPlan::execute of 1,000 x 4 KiB device 0 -> device 1 vs one raw "
                                        "cuMemcpyBatchAsync (same ABI), each round + cuStreamSynchronize (two devices)",
                                        true, plan_vs_batch});
const CaseRegistrar pool_peer_case({"peer/pool-alloc-free-1MiB",
                                    "StreamOrderedBuffer<std::byte> of 1 MiB from a pool granting device 1 access vs "
                                    "raw cuMemAllocFromPoolAsync + cuMemFreeAsync (10,000 per sample; two devices)",
                                    true, pool_alloc_with_peer_access});

}  // namespace

}  // namespace cudyn::bench
