// cudyn-bench — sharing a whole range: a GrowableBuffer of 64 chunks
// exported here and imported in a fresh process (import_range against the
// raw loop of cuMemImportFromShareableHandle + cuMemMap per chunk and one
// cuMemSetAccess), and the latency of one growth update, exporter side
// (grow, update(), send) plus importer side (receive, apply).
// bench/README.md lists the cases and their targets.
#include "harness.hpp"

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/peer_access.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::bench {

namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kChunks = 64;
constexpr const char* kChannelVariable = "CUDYN_BENCH_RANGE_CHANNEL";
constexpr const char* kRoundsVariable = "CUDYN_BENCH_RANGE_ROUNDS";
constexpr const char* kUpdatesVariable = "CUDYN_BENCH_RANGE_UPDATES";
constexpr const char* kDeviceVariable = "CUDYN_BENCH_RANGE_DEVICE";  // the importer's device

// The range's size: 16 GiB, or half of device 0's free memory where that is
// less, in 64 chunks of whole granules.
Result<std::size_t> range_bytes(std::size_t granularity) {
    CUDYN_TRY_ASSIGN(const DeviceMemoryInfo info, current_device_memory_info());
    std::size_t bytes = std::min<std::size_t>(16 * kGiB, info.free_bytes / 2);
    const std::size_t unit = kChunks * granularity;
    bytes = bytes / unit * unit;
    if (bytes == 0) return Error::invalid_argument("less than 64 granules of free device memory");
    return bytes;
}

// The exporter: device 0, a shareable GrowableBuffer of `chunks` chunks
// mapped, and a channel whose other end a child inherits.
struct Exporter {
    PrimaryContext context;
    GrowableBuffer buffer;
    RangeExporter exporter;
    FdChannel here;
    FdChannel there;  // inherited by the child (close-on-exec cleared)
};

Result<Exporter> make_exporter(std::size_t capacity_chunks, std::size_t mapped_chunks, std::size_t* chunk_bytes) {
    CUDYN_TRY_ASSIGN(const Device device, Device::get(0));
    CUDYN_TRY_ASSIGN(PrimaryContext context, PrimaryContext::activate(device));
    const auto properties = AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor);
    CUDYN_TRY_ASSIGN(const std::size_t granularity, allocation_granularity(properties));
    if (*chunk_bytes == 0) {
        CUDYN_TRY_ASSIGN(const std::size_t total, range_bytes(granularity));
        *chunk_bytes = total / kChunks;
    }
    GrowableBufferOptions options;
    options.chunk_size_bytes = *chunk_bytes;
    CUDYN_TRY_ASSIGN(GrowableBuffer buffer, GrowableBuffer::create(properties, capacity_chunks * *chunk_bytes, options));
    CUDYN_TRY(buffer.grow_to(mapped_chunks * *chunk_bytes));
    CUDYN_TRY_ASSIGN(RangeExporter exporter, RangeExporter::create(buffer));
    CUDYN_TRY_ASSIGN(auto ends, FdChannel::pair());
    const int child_end = ends.second.socket().get();
    ::fcntl(child_end, F_SETFD, ::fcntl(child_end, F_GETFD) & ~FD_CLOEXEC);
    return Exporter{std::move(context), std::move(buffer), std::move(exporter), std::move(ends.first),
                    std::move(ends.second)};
}

// A child's context (device 0, or the one kDeviceVariable names) and its
// end of the channel.
struct ChildSide {
    PrimaryContext context;
    FdChannel channel;
    int device = 0;
};

Result<ChildSide> child_side() {
    const char* fd = std::getenv(kChannelVariable);
    if (fd == nullptr) return Error::invalid_argument("no channel in " + std::string(kChannelVariable));
    const char* named = std::getenv(kDeviceVariable);
    const int ordinal = named == nullptr ? 0 : std::atoi(named);
    CUDYN_TRY_ASSIGN(const Device device, Device::get(ordinal));
    CUDYN_TRY_ASSIGN(PrimaryContext context, PrimaryContext::activate(device));
    CUDYN_TRY_ASSIGN(FdChannel channel, FdChannel::adopt(FileDescriptor(std::atoi(fd))));
    return ChildSide{std::move(context), std::move(channel), ordinal};
}

// The raw import of the same range: reserve, import and map each chunk, one
// grant to `device`; then (untimed) unmap, release, free. False on any failure.
bool raw_import(const RangeDescriptor& descriptor, int device, double* us) {
    const DriverTable& cu = driver();
    const auto start = Clock::now();
    CUdeviceptr base = 0;
    if (cu.cuMemAddressReserve_v10020(&base, descriptor.reserved_bytes, descriptor.alignment_bytes, 0, 0) !=
        CUDA_SUCCESS)
        return false;
    std::vector<CUmemGenericAllocationHandle> handles;
    bool good = true;
    for (const RangeChunk& chunk : descriptor.chunks) {
        CUmemGenericAllocationHandle handle = 0;
        if (cu.cuMemImportFromShareableHandle_v10020(&handle,
                                                     reinterpret_cast<void*>(static_cast<std::intptr_t>(chunk.fd.get())),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS ||
            cu.cuMemMap_v10020(base + chunk.offset_bytes, chunk.size_bytes, 0, handle, 0) != CUDA_SUCCESS) {
            good = false;
            if (handle != 0) cu.cuMemRelease_v10020(handle);
            break;
        }
        handles.push_back(handle);
    }
    const std::size_t mapped = handles.size() * descriptor.chunks.front().size_bytes;
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (good) good = cu.cuMemSetAccess_v10020(base, mapped, &access, 1) == CUDA_SUCCESS;
    const auto end = Clock::now();
    *us = elapsed_ns(start, end) / 1000.0;
    cu.cuCtxSynchronize_v2000();
    for (std::size_t i = 0; i < handles.size(); ++i) {
        cu.cuMemUnmap_v10020(base + descriptor.chunks[i].offset_bytes, descriptor.chunks[i].size_bytes);
        cu.cuMemRelease_v10020(handles[i]);
    }
    cu.cuMemAddressFree_v10020(base, descriptor.reserved_bytes);
    return good;
}

// The child of share/range-import-16g: receives the layout once, then times
// `rounds` raw imports and `rounds` import_range calls, alternating.
int child_import() {
    auto side = child_side();
    if (!side) return std::printf("%s\n", side.error().describe().c_str()), 1;
    FdChannel* channel = &side->channel;
    const int device = side->device;
    auto layout = receive_range(*channel);
    if (!layout) return std::printf("%s\n", layout.error().describe().c_str()), 1;
    const int rounds = std::max(3, std::atoi(std::getenv(kRoundsVariable) ? std::getenv(kRoundsVariable) : "10"));
    std::vector<double> raw_us, cudyn_us;
    for (int round = 0; round <= rounds; ++round) {  // round 0: warm-up
        for (int side = 0; side < 2; ++side) {
            const bool raw_side = (side == 0) == (round % 2 == 0);
            double us = 0;
            if (raw_side) {
                if (!raw_import(*layout, device, &us)) return std::printf("raw import failed\n"), 1;
                if (round > 0) raw_us.push_back(us);
            } else {
                auto copy = layout->duplicate();  // the receive's work, not the import's
                if (!copy) return std::printf("%s\n", copy.error().describe().c_str()), 1;
                const auto start = Clock::now();
                auto imported = import_range(std::move(*copy), {AccessGrant{Location::device(device)}});
                const auto end = Clock::now();
                if (!imported) return std::printf("%s\n", imported.error().describe().c_str()), 1;
                if (round > 0) cudyn_us.push_back(elapsed_ns(start, end) / 1000.0);
                if (auto closed = imported->close(); !closed)
                    return std::printf("%s\n", closed.error().describe().c_str()), 1;
            }
        }
    }
    std::printf("result raw_us=%.3f cudyn_us=%.3f bytes=%llu chunks=%zu\n", median(raw_us), median(cudyn_us),
                static_cast<unsigned long long>(layout->listed_bytes()), layout->chunks.size());
    for (double value : raw_us) std::printf("raw %.3f\n", value);
    for (double value : cudyn_us) std::printf("cudyn %.3f\n", value);
    return 0;
}

const ChildRegistrar import_child("range-import", child_import);

double field(const std::string& line, const std::string& key) {
    const auto at = line.find(key + "=");
    return at == std::string::npos ? 0 : std::strtod(line.c_str() + at + key.size() + 1, nullptr);
}

// Runs the child with the channel's other end and collects the "result" line
// and the samples.
CaseResult run_with_child(Exporter& exporter, const char* child, const Settings& settings, std::string* summary) {
    ::setenv(kChannelVariable, std::to_string(exporter.there.socket().get()).c_str(), 1);
    ::setenv(kRoundsVariable, std::to_string(settings.value_or_repetitions(10)).c_str(), 1);
    const ChildOutcome outcome = run_child(child);
    ::unsetenv(kChannelVariable);
    ::unsetenv(kRoundsVariable);
    if (!outcome.error.empty()) return failed(outcome.error);
    if (outcome.exit_status != 0)
        return outcome.exit_status == kChildSkip
                   ? skipped(outcome.output)
                   : failed(std::string("child ") + child + " exited " + std::to_string(outcome.exit_status) + ": " +
                            outcome.output);
    CaseResult result;
    std::istringstream lines(outcome.output);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("result ", 0) == 0) *summary = line;
        else if (line.rfind("raw ", 0) == 0) result.raw_samples.push_back(std::strtod(line.c_str() + 4, nullptr));
        else if (line.rfind("cudyn ", 0) == 0) result.cudyn_samples.push_back(std::strtod(line.c_str() + 6, nullptr));
    }
    if (summary->empty()) return failed(std::string("child ") + child + " printed no result: " + outcome.output);
    return result;
}

// Why an exporter's set-up failed: skipped where the machine lacks what it
// needs, failed otherwise.
CaseResult not_exported(const Error& error) {
    return error.code == ErrorCode::NotSupported ? skipped(error.describe()) : failed(error.describe());
}

// The exporter's layout, sent for the child to read first.
Result<void> send_layout(Exporter& exporter) {
    CUDYN_TRY_ASSIGN(RangeDescriptor layout, exporter.exporter.describe());
    return send_descriptor(exporter.here, layout);
}

// `importer`: the device the child maps the range for (1: device 0's memory
// reached over the peer link).
CaseResult range_import(const Settings& settings, int importer) {
    if (importer != 0) {
        auto count = Device::count();
        if (!count) return failed(count.error().describe());
        if (*count < 2) return skipped("one device: the peer import needs two");
        auto from = Device::get(importer);
        auto to = Device::get(0);
        if (!from || !to) return failed("devices 0 and 1 are not both there");
        auto reach = peer_attributes(*from, *to);
        if (!reach) return failed(reach.error().describe());
        if (!reach->access_supported) return skipped("device 1 cannot reach device 0's memory (no peer access)");
    }
    std::size_t chunk_bytes = 0;
    auto exporter = make_exporter(kChunks, kChunks, &chunk_bytes);
    if (!exporter) return not_exported(exporter.error());
    if (auto sent = send_layout(*exporter); !sent) return failed(sent.error().describe());
    std::string summary;
    ::setenv(kDeviceVariable, std::to_string(importer).c_str(), 1);
    CaseResult result = run_with_child(*exporter, "range-import", settings, &summary);
    ::unsetenv(kDeviceVariable);
    if (result.status != Status::Ok) return result;
    const double gib = field(summary, "bytes") / static_cast<double>(kGiB);
    result.operation = "import " + format("%.1f", gib) + " GiB in 64 chunks in a fresh process" +
                       (importer != 0 ? ", mapped for device 1" : "");
    result.raw = field(summary, "raw_us");
    result.cudyn = field(summary, "cudyn_us");
    result.unit = "us/import";
    result.iterations = 1;
    result.samples = static_cast<int>(result.raw_samples.size());
    result.statistic = "median";
    result.notes.push_back("raw: cuMemAddressReserve, cuMemImportFromShareableHandle + cuMemMap per chunk, one "
                           "cuMemSetAccess; cudyn adds the descriptor's checks, the grant checks, the properties of "
                           "each imported handle (cuMemGetAllocationPropertiesFromHandle) and the owners");
    if (gib < 16) result.notes.push_back("less than 16 GiB: device 0 had less than 32 GiB free");
    add_target_note(result, importer != 0 ? "range-import-peer-16g" : "range-import-16g", 1.05);
    return result;
}

const CaseRegistrar range_import_case({"share/range-import-16g",
                                       "import_range vs the raw import loop of a 64-chunk range of another process",
                                       true, [](const Settings& s) { return range_import(s, 0); }});
const CaseRegistrar range_import_peer_case({"share/range-import-peer-16g",
                                            "as share/range-import-16g, the importer on device 1 mapping device 0's "
                                            "chunks for itself (peer access)",
                                            true, [](const Settings& s) { return range_import(s, 1); }});

// =============================================================================
// One growth update, end to end
// =============================================================================

constexpr std::size_t kUpdateChunkBytes = std::size_t{2} << 20;

// The child of share/range-growth-update: imports the layout, then times
// receive + apply of each update already waiting on the channel.
int child_updates() {
    auto side = child_side();
    if (!side) return std::printf("%s\n", side.error().describe().c_str()), 1;
    FdChannel* channel = &side->channel;
    auto layout = receive_range(*channel);
    if (!layout) return std::printf("%s\n", layout.error().describe().c_str()), 1;
    auto imported = import_range(std::move(*layout));
    if (!imported) return std::printf("%s\n", imported.error().describe().c_str()), 1;
    const int updates = std::atoi(std::getenv(kUpdatesVariable) ? std::getenv(kUpdatesVariable) : "0");
    for (int i = 0; i < updates; ++i) {
        const auto start = Clock::now();
        auto update = receive_range(*channel);
        if (!update) return std::printf("%s\n", update.error().describe().c_str()), 1;
        if (auto applied = imported->apply(std::move(*update)); !applied)
            return std::printf("%s\n", applied.error().describe().c_str()), 1;
        const auto end = Clock::now();
        std::printf("cudyn %.3f\n", elapsed_ns(start, end) / 1000.0);
    }
    std::printf("result chunks=%zu\n", imported->chunk_count());
    return 0;
}

const ChildRegistrar updates_child("range-updates", child_updates);

CaseResult growth_update(const Settings& settings) {
    const int updates = settings.value_or_repetitions(20);
    std::size_t chunk_bytes = kUpdateChunkBytes;
    auto exporter = make_exporter(static_cast<std::size_t>(updates) + 1, 1, &chunk_bytes);
    if (!exporter) return not_exported(exporter.error());
    if (auto sent = send_layout(*exporter); !sent) return failed(sent.error().describe());
    // The exporter's side of each update: grow by one chunk, update(), send.
    std::vector<double> exporter_us;
    for (int i = 0; i < updates; ++i) {
        const auto start = Clock::now();
        if (auto grown = exporter->buffer.grow_to(static_cast<std::size_t>(i + 2) * chunk_bytes); !grown)
            return failed(grown.error().describe());
        auto update = exporter->exporter.update();
        if (!update) return failed(update.error().describe());
        if (auto sent = send_descriptor(exporter->here, *update); !sent) return failed(sent.error().describe());
        exporter_us.push_back(elapsed_ns(start, Clock::now()) / 1000.0);
    }
    ::setenv(kUpdatesVariable, std::to_string(updates).c_str(), 1);
    std::string summary;
    CaseResult child = run_with_child(*exporter, "range-updates", settings, &summary);
    ::unsetenv(kUpdatesVariable);
    if (child.status != Status::Ok) return child;
    if (child.cudyn_samples.size() != exporter_us.size()) return failed("the child applied another number of updates");
    CaseResult result;
    for (std::size_t i = 0; i < exporter_us.size(); ++i) result.cudyn_samples.push_back(exporter_us[i] + child.cudyn_samples[i]);
    result.operation = "grow by one 2 MiB chunk, update(), send; receive, apply (no raw side)";
    result.cudyn = median(result.cudyn_samples);
    result.unit = "us/update";
    result.iterations = 1;
    result.samples = static_cast<int>(result.cudyn_samples.size());
    result.statistic = "median";
    result.extra = {{"exporter_us", median(exporter_us)}, {"importer_us", median(child.cudyn_samples)}};
    result.notes.push_back("range-growth-update: end-to-end latency = exporter (grow_to + update + send) + importer "
                           "(receive_range + apply), measured apart; the socket hand-over between them is not in it");
    return result;
}

const CaseRegistrar growth_update_case({"share/range-growth-update",
                                        "latency of one growth update: exporter grow + update + send, importer "
                                        "receive + apply",
                                        true, growth_update});

}  // namespace

}  // namespace cudyn::bench
