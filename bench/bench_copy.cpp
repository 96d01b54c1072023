// cudyn-bench — copy plans: many small copies from pinned host memory to the
// device as one CopyPlan against the same copies issued raw, as one
// cuMemcpyBatchAsync call (the ABI the plan takes on this driver) and as a
// loop of cuMemcpyHtoDAsync_v2. Both sides build their arrays once, outside
// the timed rounds, so what is compared is executing the plan.
#include "harness.hpp"

#include "cudyn/memory/copy_plan.hpp"
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
template <typename Copy>
auto rounds(CopyFixture& f, Copy copy) {
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
    // The speed-up is the inverse of the paired ratio: none where the rounds were bimodal.
    const double ratio = result.ratio();
    const double speedup = ratio > 0 ? 1 / ratio : 0;
    result.extra.push_back({"speedup_vs_loop", ratio > 0 ? speedup : std::nan("")});
    result.notes.push_back("CopyPlan (" + std::string(to_string(path)) + ") vs a loop of cuMemcpyHtoDAsync_v2: " +
                           (ratio > 0 ? format("%.2f", speedup) + "x the loop's speed (paired rounds)"
                                      : std::string("bimodal: no speed-up")));
    return result;
}

const CaseRegistrar plan_vs_loop_case({"copy/plan-vs-loop-1000x4KiB",
                                       "CopyPlan::execute of 1,000 x 4 KiB pinned host -> device vs a raw loop of "
                                       "1,000 cuMemcpyHtoDAsync_v2, each round + cuStreamSynchronize",
                                       true, plan_vs_loop});

}  // namespace

}  // namespace cudyn::bench
