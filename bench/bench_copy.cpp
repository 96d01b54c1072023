// cudyn-bench — copy plans: many small copies from pinned host memory to the
// device as one CopyPlan against the same copies issued raw, as one
// cuMemcpyBatchAsync call (the ABI the plan takes on this driver) and as a
// loop of cuMemcpyHtoDAsync_v2; and 3D copies (tiles of a pitched image) as
// one CopyPlan against one raw cuMemcpy3DBatchAsync and a loop of
// cuMemcpy3DAsync_v2. Both sides build their arrays once, outside the timed
// rounds, so what is compared is executing the plan.
#include "harness.hpp"

#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/pitched_buffer.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::bench {

namespace {

constexpr std::size_t kCopies = 1000;
constexpr std::size_t kBytes = 4096;
constexpr std::uint64_t kRounds = 50;  // rounds per timed repetition (one round: 1,000 copies + synchronize)

// Device 0's primary context, a stream, 4 MB of pinned memory and of device
// memory, and the plan of 1,000 copies between them; kept for the whole run.
struct CopyFixture {
    PrimaryContext context;
    Stream stream;
    PinnedBuffer<unsigned char> host;
    DeviceBuffer<unsigned char> device;
    CopyPlan plan;
    std::vector<CUdeviceptr> destinations, sources;
    std::vector<std::size_t> sizes;
};

Result<CopyFixture> make_fixture() {
    CUDYN_TRY_ASSIGN(auto device, Device::get(0));
    CUDYN_TRY_ASSIGN(auto context, PrimaryContext::activate(device));
    CUDYN_TRY_ASSIGN(auto stream, Stream::create());
    CUDYN_TRY_ASSIGN(auto host, PinnedBuffer<unsigned char>::allocate(kCopies * kBytes));
    CUDYN_TRY_ASSIGN(auto memory, DeviceBuffer<unsigned char>::allocate(kCopies * kBytes));
    std::memset(host.data(), 0x5A, host.size_bytes());
    CopyFixture f{std::move(context), std::move(stream), std::move(host), std::move(memory), CopyPlan{}, {}, {}, {}};
    f.plan.reserve(kCopies);
    for (std::size_t i = 0; i < kCopies; ++i) {
        CUDYN_TRY_ASSIGN(auto to, f.device.device_span().subspan(i * kBytes, kBytes));
        CUDYN_TRY(f.plan.add(to, HostSpan<const unsigned char>(f.host.data() + i * kBytes, kBytes)));
        f.destinations.push_back(to.device_address());
        f.sources.push_back(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(f.host.data() + i * kBytes)));
        f.sizes.push_back(kBytes);
    }
    return f;
}

CopyFixture* fixture(std::string& error) {
    static std::optional<Result<CopyFixture>> made;
    if (!made) made.emplace(make_fixture());
    if (!made->has_value()) {
        error = made->error().describe();
        return nullptr;
    }
    return &made->value();
}

// One round of `copy` then a synchronize of the fixture's stream; a loop
// counts its failed rounds.
template <typename Fixture, typename Copy>
auto rounds(Fixture& f, Copy copy) {
    return [&f, copy](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            const bool copied = copy();
            wrong += copied && driver().cuStreamSynchronize_v2000(f.stream.handle()) == CUDA_SUCCESS ? 0 : 1;
        }
        return wrong;
    };
}

// One raw cuMemcpyBatchAsync of the fixture's copies, in the ABI `path` names.
bool raw_batch(CopyFixture& f, CopyPlan::Path path) {
    const DriverTable& cu = driver();
    CUmemcpyAttributes attributes{};
    attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    std::size_t first = 0;
    if (path == CopyPlan::Path::Batch13000)
        return cu.cuMemcpyBatchAsync_v13000(f.destinations.data(), f.sources.data(), f.sizes.data(), kCopies,
                                            &attributes, &first, 1, f.stream.handle()) == CUDA_SUCCESS;
    std::size_t failed = 0;
    return cu.cuMemcpyBatchAsync_v12080(f.destinations.data(), f.sources.data(), f.sizes.data(), kCopies, &attributes,
                                        &first, 1, &failed, f.stream.handle()) == CUDA_SUCCESS;
}

bool raw_loop(CopyFixture& f) {
    const DriverTable& cu = driver();
    for (std::size_t i = 0; i < kCopies; ++i)
        if (cu.cuMemcpyHtoDAsync_v3020(f.destinations[i], f.host.data() + i * kBytes, kBytes, f.stream.handle()) !=
            CUDA_SUCCESS)
            return false;
    return true;
}

bool plan_round(CopyFixture& f) { return f.plan.execute(f.stream).has_value(); }

void in_microseconds(CaseResult& result) {
    result.raw /= 1000;
    result.cudyn /= 1000;
    for (double& sample : result.raw_samples) sample /= 1000;
    for (double& sample : result.cudyn_samples) sample /= 1000;
    for (auto& [name, value] : result.extra)
        if (name != "delta_ns") value /= 1000;
    result.unit = "us/round";
}

// The plan's speed-up over a loop of `entry`: the inverse of the paired
// ratio, none where the rounds were bimodal.
void add_speedup(CaseResult& result, CopyPlan::Path path, const char* entry) {
    const double ratio = result.ratio();
    result.extra.push_back({"speedup_vs_loop", ratio > 0 ? 1 / ratio : std::nan("")});
    result.notes.push_back("CopyPlan (" + std::string(to_string(path)) + ") vs a loop of " + entry + ": " +
                           (ratio > 0 ? format("%.2f", 1 / ratio) + "x the loop's speed (paired rounds)"
                                      : std::string("bimodal: no speed-up")));
}

// =============================================================================
// CopyPlan of 1,000 x 4 KiB vs one raw cuMemcpyBatchAsync
// =============================================================================

CaseResult plan_vs_batch(const Settings& settings) {
    std::string error;
    CopyFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    const CopyPlan::Path path = CopyPlan::path_for(f->stream);
    if (path == CopyPlan::Path::PerCopy)
        return skipped("this driver has no cuMemcpyBatchAsync (12.8+): the plan goes copy by copy "
                       "(copy/plan-vs-loop-1000x4KiB compares that)");
    CaseResult result = compare_loops(settings, kRounds, rounds(*f, [f, path] { return raw_batch(*f, path); }),
                                      rounds(*f, [f] { return plan_round(*f); }));
    if (result.status != Status::Ok) return result;
    in_microseconds(result);
    result.operation = std::string("1000 x 4 KiB pinned -> device + cuStreamSynchronize: CopyPlan vs one raw "
                                   "cuMemcpyBatchAsync, ") + to_string(path);
    add_target_note(result, "CopyPlan vs raw batch", 1.05);
    return result;
}

const CaseRegistrar plan_vs_batch_case({"copy/plan-vs-batch-1000x4KiB",
                                        "CopyPlan::execute of 1,000 x 4 KiB pinned host -> device vs one raw "
                                        "cuMemcpyBatchAsync (same ABI), each round + cuStreamSynchronize",
                                        true, plan_vs_batch});

// =============================================================================
// CopyPlan of 1,000 x 4 KiB vs a raw loop of cuMemcpyHtoDAsync_v2
// =============================================================================

CaseResult plan_vs_loop(const Settings& settings) {
    std::string error;
    CopyFixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    CaseResult result = compare_loops(settings, kRounds, rounds(*f, [f] { return raw_loop(*f); }),
                                      rounds(*f, [f] { return plan_round(*f); }));
    if (result.status != Status::Ok) return result;
    in_microseconds(result);
    const CopyPlan::Path path = CopyPlan::path_for(f->stream);
    result.operation = std::string("1000 x 4 KiB pinned -> device + cuStreamSynchronize: CopyPlan (") +
                       to_string(path) + ") vs 1000 raw cuMemcpyHtoDAsync_v2";
    add_speedup(result, path, "cuMemcpyHtoDAsync_v2");
    return result;
}

const CaseRegistrar plan_vs_loop_case({"copy/plan-vs-loop-1000x4KiB",
                                       "CopyPlan::execute of 1,000 x 4 KiB pinned host -> device vs a raw loop of "
                                       "1,000 cuMemcpyHtoDAsync_v2, each round + cuStreamSynchronize",
                                       true, plan_vs_loop});

// =============================================================================
// 3D: a CopyPlan of 64 tiles of 16 KiB (256 bytes x 64 rows) from pinned host
// memory into a pitched device image, vs one raw cuMemcpy3DBatchAsync and vs
// a loop of cuMemcpy3DAsync_v2
// =============================================================================

constexpr std::size_t kTiles = 64;
constexpr std::size_t kTileWidth = 256;
constexpr std::size_t kTileRows = 64;
constexpr std::size_t kTilesPerRow = 8;

struct TileFixture {
    PrimaryContext context;
    Stream stream;
    PinnedBuffer<unsigned char> host;
    PitchedBuffer image;
    CopyPlan plan;
    std::vector<CUDA_MEMCPY3D_BATCH_OP> ops;
    std::vector<CUDA_MEMCPY3D> descriptors;
};

Result<TileFixture> make_tile_fixture() {
    CUDYN_TRY_ASSIGN(auto device, Device::get(0));
    CUDYN_TRY_ASSIGN(auto context, PrimaryContext::activate(device));
    CUDYN_TRY_ASSIGN(auto stream, Stream::create());
    CUDYN_TRY_ASSIGN(auto host, PinnedBuffer<unsigned char>::allocate(kTiles * kTileWidth * kTileRows));
    CUDYN_TRY_ASSIGN(auto image, PitchedBuffer::allocate(kTilesPerRow * kTileWidth,
                                                          kTiles / kTilesPerRow * kTileRows));
    std::memset(host.data(), 0x3C, host.size_bytes());
    TileFixture f{std::move(context), std::move(stream), std::move(host), std::move(image), CopyPlan{}, {}, {}};
    f.plan.reserve(kTiles);
    for (std::size_t t = 0; t < kTiles; ++t) {
        CUDYN_TRY_ASSIGN(const auto tile, PitchedSpan::host(static_cast<const void*>(f.host.data() + t * kTileWidth * kTileRows),
                                                            kTileWidth, kTileWidth, kTileRows));
        const PitchedCopy copy{f.image.span(), {t % kTilesPerRow * kTileWidth, t / kTilesPerRow * kTileRows, 0}, tile,
                               {}, {kTileWidth, kTileRows, 1}};
        CUDYN_TRY(f.plan.add_3d(copy));
        CUDA_MEMCPY3D_BATCH_OP op{};
        op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.src.op.ptr.ptr = tile.address();
        op.src.op.ptr.rowLength = kTileWidth;
        op.src.op.ptr.layerHeight = kTileRows;
        op.dst.op.ptr.ptr = f.image.device_address() + copy.destination_offset.y * f.image.pitch() +
                            copy.destination_offset.x_bytes;
        op.dst.op.ptr.rowLength = f.image.pitch();
        op.dst.op.ptr.layerHeight = f.image.height();
        op.extent = {kTileWidth, kTileRows, 1};
        op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        f.ops.push_back(op);
        CUDA_MEMCPY3D d{};
        d.srcMemoryType = CU_MEMORYTYPE_HOST;
        d.srcHost = f.host.data() + t * kTileWidth * kTileRows;
        d.srcPitch = kTileWidth;
        d.srcHeight = kTileRows;
        d.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        d.dstDevice = op.dst.op.ptr.ptr;
        d.dstPitch = f.image.pitch();
        d.dstHeight = f.image.height();
        d.WidthInBytes = kTileWidth;
        d.Height = kTileRows;
        d.Depth = 1;
        f.descriptors.push_back(d);
    }
    return f;
}

TileFixture* tile_fixture(std::string& error) {
    static std::optional<Result<TileFixture>> made;
    if (!made) made.emplace(make_tile_fixture());
    if (!made->has_value()) {
        error = made->error().describe();
        return nullptr;
    }
    return &made->value();
}

bool raw_3d_batch(TileFixture& f, CopyPlan::Path path) {
    const DriverTable& cu = driver();
    if (path == CopyPlan::Path::Batch13000)
        return cu.cuMemcpy3DBatchAsync_v13000(kTiles, f.ops.data(), 0, f.stream.handle()) == CUDA_SUCCESS;
    std::size_t failed = 0;
    return cu.cuMemcpy3DBatchAsync_v12080(kTiles, f.ops.data(), &failed, 0, f.stream.handle()) == CUDA_SUCCESS;
}

bool raw_3d_loop(TileFixture& f) {
    const DriverTable& cu = driver();
    for (const CUDA_MEMCPY3D& d : f.descriptors)
        if (cu.cuMemcpy3DAsync_v3020(&d, f.stream.handle()) != CUDA_SUCCESS) return false;
    return true;
}

CaseResult tiles_vs_batch(const Settings& settings) {
    std::string error;
    TileFixture* f = tile_fixture(error);
    if (f == nullptr) return skipped(error);
    const CopyPlan::Path path = CopyPlan::path_for(f->stream);
    const bool has_3d = path == CopyPlan::Path::Batch13000 ? has_entry(&DriverTable::cuMemcpy3DBatchAsync_v13000)
                                                           : has_entry(&DriverTable::cuMemcpy3DBatchAsync_v12080);
    if (path == CopyPlan::Path::PerCopy || !has_3d)
        return skipped("this driver has no cuMemcpy3DBatchAsync (12.8+): the plan goes copy by copy "
                       "(copy3d/plan-vs-loop-64x16KiB compares that)");
    CaseResult result = compare_loops(settings, kRounds, rounds(*f, [f, path] { return raw_3d_batch(*f, path); }),
                                      rounds(*f, [f] { return f->plan.execute(f->stream).has_value(); }));
    if (result.status != Status::Ok) return result;
    in_microseconds(result);
    result.operation = std::string("64 x 16 KiB tiles pinned -> pitched device + cuStreamSynchronize: CopyPlan vs "
                                   "one raw cuMemcpy3DBatchAsync, ") + to_string(path);
    add_target_note(result, "CopyPlan vs raw 3D batch", 1.05);
    return result;
}

const CaseRegistrar tiles_vs_batch_case({"copy3d/plan-vs-batch-64x16KiB",
                                         "CopyPlan::execute of 64 3D copies (256 B x 64 rows) pinned host -> "
                                         "pitched device vs one raw cuMemcpy3DBatchAsync (same ABI), each round + "
                                         "cuStreamSynchronize",
                                         true, tiles_vs_batch});

CaseResult tiles_vs_loop(const Settings& settings) {
    std::string error;
    TileFixture* f = tile_fixture(error);
    if (f == nullptr) return skipped(error);
    CaseResult result = compare_loops(settings, kRounds, rounds(*f, [f] { return raw_3d_loop(*f); }),
                                      rounds(*f, [f] { return f->plan.execute(f->stream).has_value(); }));
    if (result.status != Status::Ok) return result;
    in_microseconds(result);
    const CopyPlan::Path path = CopyPlan::path_for(f->stream);
    result.operation = std::string("64 x 16 KiB tiles pinned -> pitched device + cuStreamSynchronize: CopyPlan (") +
                       to_string(path) + ") vs 64 raw cuMemcpy3DAsync_v2";
    add_speedup(result, path, "cuMemcpy3DAsync_v2");
    return result;
}

const CaseRegistrar tiles_vs_loop_case({"copy3d/plan-vs-loop-64x16KiB",
                                        "CopyPlan::execute of 64 3D copies (256 B x 64 rows) pinned host -> pitched "
                                        "device vs a raw loop of 64 cuMemcpy3DAsync_v2, each round + "
                                        "cuStreamSynchronize",
                                        true, tiles_vs_loop});

}  // namespace

}  // namespace cudyn::bench
