// cudyn-driver-facts — what the real driver does about work still running:
// when each no-stream call returns against when its work is done, which
// releases wait for a kernel using the memory, what the legacy stream waits
// for, when a copy batch returns against the stream work before it. cudyn's
// synchronous calls and teardown rest on these facts and the fake driver
// models them. Every scenario runs in a process of its own (a race may
// lose the context) and prints "fact ..." lines; `cudyn-driver-facts NAME`
// runs one in this process.
#include "cudyn/cudyn.hpp"
#include "../tests/support/ptx_kernels.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using cudyn::DriverTable;

double us_since(Clock::time_point start) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

[[noreturn]] void fail(const char* what, const cudyn::Error& error) {
    std::printf("fact error %s: %s\n", what, error.describe().c_str());
    std::exit(1);
}

template <typename T>
T must(cudyn::Result<T> result, const char* what) {
    if (!result) fail(what, result.error());
    return std::move(*result);
}
void must(cudyn::Result<void> result, const char* what) {
    if (!result) fail(what, result.error());
}

const DriverTable& cu() { return cudyn::driver(); }

const char* result_name(CUresult rc) {
    const char* name = nullptr;
    if (cu().cuGetErrorName_v6000 == nullptr || cu().cuGetErrorName_v6000(rc, &name) != CUDA_SUCCESS || !name)
        return "?";
    return name;
}

struct Session {
    cudyn::PrimaryContext context;
    cudyn_test::PtxKernels kernels;
    CUstream stream = nullptr;  // created, non-blocking
};

Session open_session() {
    auto device = must(cudyn::Device::get(0), "Device::get");
    auto context = must(cudyn::PrimaryContext::activate(device), "activate");
    auto kernels = must(cudyn_test::PtxKernels::load(), "PtxKernels::load");
    CUstream stream = nullptr;
    must(cudyn::call_driver(&DriverTable::cuStreamCreate_v2000, &stream, unsigned{CU_STREAM_NON_BLOCKING}),
         "cuStreamCreate");
    return Session{std::move(context), std::move(kernels), stream};
}

std::size_t free_bytes() {
    std::size_t free = 0, total = 0;
    must(cudyn::call_driver(&DriverTable::cuMemGetInfo_v3020, &free, &total), "cuMemGetInfo");
    return free;
}

// ---- when no-stream calls return, against when their work is done ------------------

void time_call(const char* name, std::size_t bytes, const std::function<CUresult()>& call) {
    for (int round = 0; round < 3; ++round) {
        const auto start = Clock::now();
        const CUresult rc = call();
        const double returned = us_since(start);
        const CUresult synced = cu().cuCtxSynchronize_v2000();
        const double done = us_since(start);
        std::printf("fact returns %-26s bytes=%zu round=%d return_us=%.1f done_us=%.1f rc=%s sync=%s\n", name, bytes,
                    round, returned, done, result_name(rc), result_name(synced));
    }
}

int scenario_returns() {
    Session s = open_session();
    constexpr std::size_t kGiB = std::size_t{1} << 30;
    if (free_bytes() < 6 * kGiB) {
        std::printf("fact skipped returns: under 6 GiB free\n");
        return 0;
    }
    CUdeviceptr device = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &device, 4 * kGiB), "cuMemAlloc 4 GiB");
    time_call("cuMemsetD32 device", 4 * kGiB, [&] { return cu().cuMemsetD32_v3020(device, 7u, kGiB); });
    time_call("cuMemsetD8 device", 4 * kGiB, [&] { return cu().cuMemsetD8_v3020(device, 7, 4 * kGiB); });
    time_call("cuMemcpyDtoD", 2 * kGiB,
              [&] { return cu().cuMemcpyDtoD_v3020(device + 2 * kGiB, device, 2 * kGiB); });
    std::vector<unsigned char> pageable(kGiB, 1);
    time_call("cuMemcpyHtoD pageable", kGiB, [&] { return cu().cuMemcpyHtoD_v3020(device, pageable.data(), kGiB); });
    time_call("cuMemcpyDtoH pageable", kGiB, [&] { return cu().cuMemcpyDtoH_v3020(pageable.data(), device, kGiB); });
    void* pinned = nullptr;
    must(cudyn::call_driver(&DriverTable::cuMemHostAlloc_v2020, &pinned, kGiB, unsigned{CU_MEMHOSTALLOC_DEVICEMAP}),
         "cuMemHostAlloc 1 GiB");
    time_call("cuMemcpyHtoD pinned", kGiB, [&] { return cu().cuMemcpyHtoD_v3020(device, pinned, kGiB); });
    time_call("cuMemcpyDtoH pinned", kGiB, [&] { return cu().cuMemcpyDtoH_v3020(pinned, device, kGiB); });
    CUdeviceptr mapped = 0;
    must(cudyn::call_driver(&DriverTable::cuMemHostGetDevicePointer_v3020, &mapped, pinned, 0u), "device pointer");
    time_call("cuMemsetD32 mapped pinned", kGiB, [&] { return cu().cuMemsetD32_v3020(mapped, 3u, kGiB / 4); });
    CUdeviceptr managed = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAllocManaged_v6000, &managed, kGiB, unsigned{CU_MEM_ATTACH_GLOBAL}),
         "cuMemAllocManaged 1 GiB");
    time_call("cuMemsetD32 managed", kGiB, [&] { return cu().cuMemsetD32_v3020(managed, 5u, kGiB / 4); });
    // A memset on the legacy stream right after a long kernel on it: the
    // call itself returns at once, the work waits its turn.
    must(s.kernels.delayed_fill_u32(device, 1024, 1u, 200'000'000, nullptr), "delayed fill");
    time_call("cuMemsetD32 4KiB after 200ms kernel", 4096, [&] { return cu().cuMemsetD32_v3020(device, 1u, 1024); });
    (void)cu().cuMemFree_v3020(managed);
    (void)cu().cuMemFreeHost_v2000(pinned);
    (void)cu().cuMemFree_v3020(device);
    return 0;
}

// ---- releases raced against a kernel that still uses the memory -----------------------

constexpr std::uint64_t kDelayNs = 300'000'000;  // the kernel writes 300 ms after it starts
constexpr std::size_t kWords = 1 << 20;          // 4 MiB

// Launches the delayed fill over `target` on `stream`, then releases; reports
// how long the release took and what the next synchronize says.
void race(const char* name, Session& s, CUdeviceptr target, CUstream stream, const std::function<CUresult()>& release) {
    must(s.kernels.delayed_fill_u32(target, kWords, 0xABCDu, kDelayNs, stream), "delayed fill");
    const auto start = Clock::now();
    const CUresult rc = release();
    const double released = us_since(start);
    const CUresult synced = cu().cuCtxSynchronize_v2000();
    std::printf("fact release %-22s waited_us=%.0f kernel_us=%.0f rc=%s next_sync=%s\n", name, released,
                kDelayNs / 1000.0, result_name(rc), result_name(synced));
}

int scenario_free_device() {
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &p, kWords * 4), "cuMemAlloc");
    race("cuMemFree device", s, p, s.stream, [&] { return cu().cuMemFree_v3020(p); });
    return 0;
}

int scenario_free_managed() {
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAllocManaged_v6000, &p, kWords * 4, unsigned{CU_MEM_ATTACH_GLOBAL}),
         "cuMemAllocManaged");
    race("cuMemFree managed", s, p, s.stream, [&] { return cu().cuMemFree_v3020(p); });
    return 0;
}

int scenario_free_host() {
    Session s = open_session();
    void* host = nullptr;
    must(cudyn::call_driver(&DriverTable::cuMemHostAlloc_v2020, &host, kWords * 4, unsigned{CU_MEMHOSTALLOC_DEVICEMAP}),
         "cuMemHostAlloc");
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemHostGetDevicePointer_v3020, &p, host, 0u), "device pointer");
    race("cuMemFreeHost", s, p, s.stream, [&] { return cu().cuMemFreeHost_v2000(host); });
    return 0;
}

int scenario_unregister() {
    Session s = open_session();
    void* host = std::aligned_alloc(4096, kWords * 4);
    std::memset(host, 0, kWords * 4);
    must(cudyn::call_driver(&DriverTable::cuMemHostRegister_v6050, host, kWords * 4,
                            unsigned{CU_MEMHOSTREGISTER_DEVICEMAP}),
         "cuMemHostRegister");
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemHostGetDevicePointer_v3020, &p, host, 0u), "device pointer");
    race("cuMemHostUnregister", s, p, s.stream, [&] { return cu().cuMemHostUnregister_v4000(host); });
    return 0;  // `host` stays allocated: a late write must not land in freed heap memory
}

struct VmmChunk {
    CUdeviceptr address = 0;
    std::size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
};

VmmChunk map_chunk() {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    VmmChunk chunk;
    must(cudyn::call_driver(&DriverTable::cuMemGetAllocationGranularity_v10020, &chunk.size, &prop,
                            CU_MEM_ALLOC_GRANULARITY_MINIMUM),
         "granularity");
    chunk.size = std::max(chunk.size, kWords * 4);
    must(cudyn::call_driver(&DriverTable::cuMemAddressReserve_v10020, &chunk.address, chunk.size, std::size_t{0},
                            CUdeviceptr{0}, 0ULL),
         "reserve");
    must(cudyn::call_driver(&DriverTable::cuMemCreate_v10020, &chunk.handle, chunk.size, &prop, 0ULL), "create");
    must(cudyn::call_driver(&DriverTable::cuMemMap_v10020, chunk.address, chunk.size, std::size_t{0}, chunk.handle,
                            0ULL),
         "map");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    must(cudyn::call_driver(&DriverTable::cuMemSetAccess_v10020, chunk.address, chunk.size, &access, std::size_t{1}),
         "access");
    return chunk;
}

int scenario_unmap() {
    Session s = open_session();
    const VmmChunk chunk = map_chunk();
    race("cuMemUnmap", s, chunk.address, s.stream, [&] { return cu().cuMemUnmap_v10020(chunk.address, chunk.size); });
    return 0;
}

int scenario_release_mapped() {
    // cuMemRelease while still mapped: the memory must live until the unmap.
    Session s = open_session();
    const VmmChunk chunk = map_chunk();
    race("cuMemRelease mapped", s, chunk.address, s.stream, [&] { return cu().cuMemRelease_v10020(chunk.handle); });
    return 0;
}

int scenario_stream_destroy() {
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &p, kWords * 4), "cuMemAlloc");
    race("cuStreamDestroy", s, p, s.stream, [&] { return cu().cuStreamDestroy_v4000(s.stream); });
    std::uint32_t first = 0;
    must(cudyn::call_driver(&DriverTable::cuMemcpyDtoH_v3020, &first, p, sizeof first), "read back");
    std::printf("fact release cuStreamDestroy kernel_finished=%d\n", first == 0xABCDu ? 1 : 0);
    return 0;
}

int scenario_primary_release() {
    // The last reference of the primary context let go under a running kernel.
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &p, kWords * 4), "cuMemAlloc");
    must(s.kernels.delayed_fill_u32(p, kWords, 0xABCDu, kDelayNs, s.stream), "delayed fill");
    const auto start = Clock::now();
    const auto released = s.context.release();
    std::printf("fact release primary-context-last waited_us=%.0f kernel_us=%.0f rc=%s\n", us_since(start),
                kDelayNs / 1000.0, released ? "CUDA_SUCCESS" : released.error().describe().c_str());
    // The same address range allocated again in a new context: does it come back?
    auto device = must(cudyn::Device::get(0), "Device::get");
    auto again = must(cudyn::PrimaryContext::activate(device), "activate again");
    CUdeviceptr q = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &q, kWords * 4), "cuMemAlloc again");
    std::printf("fact context-recreate same_address=%d\n", q == p ? 1 : 0);
    const CUresult stale = cu().cuMemFree_v3020(p);
    std::printf("fact context-recreate stale_free_rc=%s\n", result_name(stale));
    return 0;
}

std::string to_hex(const void* data, std::size_t size) {
    std::string text;
    char digits[3];
    for (std::size_t i = 0; i < size; ++i) {
        std::snprintf(digits, sizeof digits, "%02x", static_cast<const unsigned char*>(data)[i]);
        text += digits;
    }
    return text;
}

int run_self(const std::vector<std::string>& arguments, int timeout_s);

int scenario_ipc_close() {
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &p, kWords * 4), "cuMemAlloc");
    CUipcMemHandle handle{};
    must(cudyn::call_driver(&DriverTable::cuIpcGetMemHandle_v4010, &handle, p), "cuIpcGetMemHandle");
    const int status = run_self({"ipc-close-child", to_hex(&handle, sizeof handle)}, 60);
    (void)cu().cuMemFree_v3020(p);
    return status;
}

int scenario_ipc_close_child(const char* hex) {
    Session s = open_session();
    CUipcMemHandle handle{};
    for (std::size_t i = 0; i < sizeof handle && hex[2 * i] && hex[2 * i + 1]; ++i) {
        const char pair[3] = {hex[2 * i], hex[2 * i + 1], 0};
        handle.reserved[i] = static_cast<char>(std::strtol(pair, nullptr, 16));
    }
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuIpcOpenMemHandle_v11000, &p, handle,
                            unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}),
         "cuIpcOpenMemHandle");
    race("cuIpcCloseMemHandle", s, p, s.stream, [&] { return cu().cuIpcCloseMemHandle_v4010(p); });
    return 0;
}

// ---- what the legacy default stream waits for ----------------------------------------

int scenario_legacy_stream() {
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &p, 2 * kWords * 4), "cuMemAlloc");
    CUstream blocking = nullptr;
    must(cudyn::call_driver(&DriverTable::cuStreamCreate_v2000, &blocking, unsigned{CU_STREAM_DEFAULT}),
         "cuStreamCreate blocking");
    const struct {
        const char* name;
        CUstream stream;
    } cases[] = {{"blocking", blocking}, {"non-blocking", s.stream}};
    for (const auto& c : cases) {
        // The kernel writes the first 4 MiB; the memset touches the second.
        must(s.kernels.delayed_fill_u32(p, kWords, 1u, kDelayNs, c.stream), "delayed fill");
        auto start = Clock::now();
        const CUresult sync = cu().cuStreamSynchronize_v2000(CU_STREAM_LEGACY);
        std::printf("fact legacy cuStreamSynchronize(LEGACY) after-%s-kernel waited_us=%.0f rc=%s\n", c.name,
                    us_since(start), result_name(sync));
        must(cudyn::call_driver(&DriverTable::cuCtxSynchronize_v2000), "sync");
        must(s.kernels.delayed_fill_u32(p, kWords, 1u, kDelayNs, c.stream), "delayed fill");
        start = Clock::now();
        const CUresult set = cu().cuMemsetD32_v3020(p + kWords * 4, 2u, kWords);
        const CUresult set_sync = cu().cuStreamSynchronize_v2000(CU_STREAM_LEGACY);
        std::printf("fact legacy cuMemsetD32+sync(LEGACY) after-%s-kernel waited_us=%.0f rc=%s/%s\n", c.name,
                    us_since(start), result_name(set), result_name(set_sync));
        must(cudyn::call_driver(&DriverTable::cuCtxSynchronize_v2000), "sync");
    }
    return 0;
}

// ---- what an idle synchronize and a small call cost ----------------------------------

template <typename Body>
void per_call(const char* name, Body body) {
    constexpr int kCalls = 20000;
    std::vector<double> rounds;
    for (int round = 0; round < 7; ++round) {
        const auto start = Clock::now();
        for (int i = 0; i < kCalls; ++i) body();
        rounds.push_back(us_since(start) * 1000.0 / kCalls);
    }
    std::sort(rounds.begin(), rounds.end());
    std::printf("fact cost %-44s min_ns=%.0f median_ns=%.0f max_ns=%.0f\n", name, rounds.front(), rounds[3],
                rounds.back());
}

int scenario_costs() {
    Session s = open_session();
    CUdeviceptr p = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &p, std::size_t{1} << 20), "cuMemAlloc");
    std::vector<unsigned char> host(4096, 1);
    per_call("idle cuCtxSynchronize", [] { (void)cu().cuCtxSynchronize_v2000(); });
    per_call("idle cuStreamSynchronize(LEGACY)", [] { (void)cu().cuStreamSynchronize_v2000(CU_STREAM_LEGACY); });
    per_call("idle cuStreamSynchronize(created)", [&] { (void)cu().cuStreamSynchronize_v2000(s.stream); });
    per_call("cuMemsetD32 4KiB", [&] { (void)cu().cuMemsetD32_v3020(p, 1u, 1024); });
    (void)cu().cuCtxSynchronize_v2000();
    per_call("cuMemsetD32 4KiB + sync(LEGACY)", [&] {
        (void)cu().cuMemsetD32_v3020(p, 1u, 1024);
        (void)cu().cuStreamSynchronize_v2000(CU_STREAM_LEGACY);
    });
    per_call("cuMemsetD32 4KiB + cuCtxSynchronize", [&] {
        (void)cu().cuMemsetD32_v3020(p, 1u, 1024);
        (void)cu().cuCtxSynchronize_v2000();
    });
    per_call("cuMemcpyHtoD 4KiB pageable", [&] { (void)cu().cuMemcpyHtoD_v3020(p, host.data(), 4096); });
    per_call("cuMemcpyHtoD 4KiB pageable + sync(LEGACY)", [&] {
        (void)cu().cuMemcpyHtoD_v3020(p, host.data(), 4096);
        (void)cu().cuStreamSynchronize_v2000(CU_STREAM_LEGACY);
    });
    per_call("cuMemcpyDtoH 4KiB pageable", [&] { (void)cu().cuMemcpyDtoH_v3020(host.data(), p, 4096); });
    per_call("cuMemcpyDtoD 4KiB", [&] { (void)cu().cuMemcpyDtoD_v3020(p + 8192, p, 4096); });
    per_call("cuMemcpyDtoD 4KiB + sync(LEGACY)", [&] {
        (void)cu().cuMemcpyDtoD_v3020(p + 8192, p, 4096);
        (void)cu().cuStreamSynchronize_v2000(CU_STREAM_LEGACY);
    });
    (void)cu().cuMemFree_v3020(p);
    return 0;
}

// ---- when a copy batch returns, against the stream work before it ---------------------

// A batch of one copy, issued on a non-blocking stream behind a kernel that
// writes the batch's device side after kDelayNs: does the call wait for that
// work, and are the bytes there when it returns? For a host source the
// source is overwritten right after the return: the device then ends with
// the first bytes if the source was read (staged) before the call returned,
// with the second if it was read in stream order. For a host destination
// the destination is read right after the return (before any synchronize).
constexpr std::uint32_t kInitial = 0x11111111u;      // the device side before the kernel
constexpr std::uint32_t kKernel = 0x22222222u;       // what the kernel writes
constexpr std::uint32_t kSource = 0x33333333u;       // a host source at the call
constexpr std::uint32_t kOverwritten = 0x44444444u;  // a host source right after the return
constexpr std::uint32_t kStale = 0x55555555u;        // a host destination before the copy

const char* word_name(std::uint32_t word) {
    switch (word) {
        case kInitial: return "initial";
        case kKernel: return "kernel";
        case kSource: return "source-at-call";
        case kOverwritten: return "source-after-return";
        case kStale: return "stale";
        default: return "other";
    }
}

const char* order_name(CUmemcpySrcAccessOrder order) {
    switch (order) {
        case CU_MEMCPY_SRC_ACCESS_ORDER_STREAM: return "stream";
        case CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL: return "during-call";
        case CU_MEMCPY_SRC_ACCESS_ORDER_ANY: return "any";
        default: return "?";
    }
}

CUresult batch_one(bool abi13, CUdeviceptr destination, CUdeviceptr source, std::size_t bytes,
                   CUmemcpySrcAccessOrder order, CUstream stream) {
    CUmemcpyAttributes attributes{};
    attributes.srcAccessOrder = order;
    std::size_t first = 0;
    std::size_t failed = SIZE_MAX;
    if (abi13)
        return cu().cuMemcpyBatchAsync_v13000(&destination, &source, &bytes, 1, &attributes, &first, 1, stream);
    return cu().cuMemcpyBatchAsync_v12080(&destination, &source, &bytes, 1, &attributes, &first, 1, &failed, stream);
}

std::uint32_t device_word(CUdeviceptr address) {
    std::uint32_t word = 0;
    // The legacy stream does not wait for the non-blocking one: this reads
    // the device as it is now.
    must(cudyn::call_driver(&DriverTable::cuMemcpyDtoH_v3020, &word, address, sizeof word), "peek");
    return word;
}

void fill_words(void* host, std::size_t bytes, std::uint32_t word) {
    auto* words = static_cast<std::uint32_t*>(host);
    for (std::size_t i = 0; i < bytes / 4; ++i) words[i] = word;
}

enum class HostKind { Pageable, Pinned };

void batch_case(Session& s, bool abi13, bool to_device, HostKind kind, std::size_t bytes,
                CUmemcpySrcAccessOrder order) {
    const std::size_t words = bytes / 4;
    CUdeviceptr device = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &device, bytes), "cuMemAlloc");
    std::vector<std::uint32_t> pageable;
    void* host = nullptr;
    if (kind == HostKind::Pinned) {
        must(cudyn::call_driver(&DriverTable::cuMemHostAlloc_v2020, &host, bytes, 0u), "cuMemHostAlloc");
    } else {
        pageable.resize(words);
        host = pageable.data();
    }
    const auto host_address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(host));
    const char* name = to_device ? (kind == HostKind::Pinned ? "pinned->device" : "pageable->device")
                                 : (kind == HostKind::Pinned ? "device->pinned" : "device->pageable");
    for (int round = 0; round < 3; ++round) {
        must(cudyn::call_driver(&DriverTable::cuMemsetD32_v3020, device, kInitial, words), "memset");
        must(cudyn::call_driver(&DriverTable::cuCtxSynchronize_v2000), "sync");
        fill_words(host, bytes, to_device ? kSource : kStale);
        must(s.kernels.delayed_fill_u32(device, words, kKernel, kDelayNs, s.stream), "delayed fill");
        const auto start = Clock::now();
        const CUresult rc = to_device ? batch_one(abi13, device, host_address, bytes, order, s.stream)
                                      : batch_one(abi13, host_address, device, bytes, order, s.stream);
        const double returned = us_since(start);
        std::uint32_t first = 0, last = 0;
        if (to_device) {
            fill_words(host, bytes, kOverwritten);
            first = device_word(device);
            last = device_word(device + bytes - 4);
        } else {
            first = static_cast<const std::uint32_t*>(host)[0];
            last = static_cast<const std::uint32_t*>(host)[words - 1];
        }
        const CUresult synced = cu().cuStreamSynchronize_v2000(s.stream);
        const double done = us_since(start);
        const std::uint32_t final_first = to_device ? device_word(device) : static_cast<const std::uint32_t*>(host)[0];
        const std::uint32_t final_last =
            to_device ? device_word(device + bytes - 4) : static_cast<const std::uint32_t*>(host)[words - 1];
        std::printf(
            "fact batch %-17s abi=%s order=%-11s bytes=%zu round=%d return_us=%.1f kernel_us=%.0f done_us=%.1f "
            "at_return=%s/%s final=%s/%s rc=%s sync=%s\n",
            name, abi13 ? "13.0" : "12.8", order_name(order), bytes, round, returned, kDelayNs / 1000.0, done,
            word_name(first), word_name(last), word_name(final_first), word_name(final_last), result_name(rc),
            result_name(synced));
    }
    if (kind == HostKind::Pinned) (void)cu().cuMemFreeHost_v2000(host);
    (void)cu().cuMemFree_v3020(device);
}

int scenario_batch_timing() {
    if (cu().cuMemcpyBatchAsync_v13000 == nullptr || cu().cuMemcpyBatchAsync_v12080 == nullptr) {
        std::printf("fact skipped batch-timing: the driver has no cuMemcpyBatchAsync\n");
        return 0;
    }
    Session s = open_session();
    constexpr std::size_t kSmall = 4096;
    constexpr std::size_t kLarge = std::size_t{64} << 20;
    for (const std::size_t bytes : {kSmall, kLarge}) {
        for (const HostKind kind : {HostKind::Pageable, HostKind::Pinned}) {
            for (const auto order : {CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
                                     CU_MEMCPY_SRC_ACCESS_ORDER_ANY})
                batch_case(s, true, true, kind, bytes, order);
            batch_case(s, true, false, kind, bytes, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
        }
    }
    // The 12.8 ABI on the pageable cases, to see that it returns at the same point.
    batch_case(s, false, true, HostKind::Pageable, kSmall, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
    batch_case(s, false, false, HostKind::Pageable, kSmall, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
    return 0;
}

// ---- the driver ------------------------------------------------------------------------

// ---- host-NUMA locations: what the range attributes report after each call -----------

int range_int(CUmem_range_attribute attribute, CUdeviceptr base, std::size_t bytes) {
    int value = -99;
    const CUresult rc = cu().cuMemRangeGetAttribute_v8000(&value, sizeof value, attribute, base, bytes);
    return rc == CUDA_SUCCESS ? value : -1000 - static_cast<int>(rc);
}

void report_locations(const char* step, CUresult rc, CUdeviceptr base, std::size_t bytes) {
    std::printf("fact numa step=%-34s rc=%s preferred=%d preferred_type=%d preferred_id=%d last_prefetch=%d "
                "last_prefetch_type=%d last_prefetch_id=%d\n",
                step, result_name(rc), range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, base, bytes),
                range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, base, bytes),
                range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, base, bytes),
                range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, base, bytes),
                range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, base, bytes),
                range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, base, bytes));
}

int scenario_numa_locations() {
    Session s = open_session();
    if (cu().cuMemAdvise_v12020 == nullptr || cu().cuMemPrefetchAsync_v12020 == nullptr) {
        std::printf("fact skipped numa: no location ABI\n");
        return 0;
    }
    int node = -1;
    must(cudyn::call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID,
                            CUdevice{0}),
         "HOST_NUMA_ID");
    std::printf("fact numa host_numa_id=%d\n", node);
    const std::size_t bytes = std::size_t{64} << 20;
    CUdeviceptr base = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAllocManaged_v6000, &base, bytes, unsigned{CU_MEM_ATTACH_GLOBAL}),
         "cuMemAllocManaged");
    const CUmemLocation device0{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    const CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
    const CUmemLocation numa{CU_MEM_LOCATION_TYPE_HOST_NUMA, node < 0 ? 0 : node};
    const auto advise = [&](const char* step, CUmem_advise advice, CUmemLocation where) {
        report_locations(step, cu().cuMemAdvise_v12020(base, bytes, advice, where), base, bytes);
    };
    const auto prefetch = [&](const char* step, CUmemLocation where) {
        CUresult rc = cu().cuMemPrefetchAsync_v12020(base, bytes, where, 0, s.stream);
        if (rc == CUDA_SUCCESS) rc = cu().cuStreamSynchronize_v2000(s.stream);
        report_locations(step, rc, base, bytes);
    };
    report_locations("fresh", CUDA_SUCCESS, base, bytes);
    prefetch("prefetch device 0", device0);
    prefetch("prefetch host", host);
    prefetch("prefetch host_numa", numa);
    prefetch("prefetch device 0 again", device0);
    advise("advise preferred device 0", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device0);
    advise("advise preferred host", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host);
    advise("advise preferred host_numa", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, numa);
    advise("unset preferred", CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, device0);
    advise("advise preferred host_numa (from unset)", CU_MEM_ADVISE_SET_PREFERRED_LOCATION, numa);
    prefetch("prefetch device 0 after numa advice", device0);
    must(cudyn::call_driver(&DriverTable::cuMemFree_v3020, base), "cuMemFree");
    return 0;
}


// ---- stream work on a stream of another context ----------------------------------

// Device 1's stream, device 0's context current: what each stream-taking call
// answers (the fake answers what is printed here). Needs two devices.
int scenario_cross_context_stream() {
    int count = 0;
    must(cudyn::call_driver(&DriverTable::cuDeviceGetCount_v2000, &count), "cuDeviceGetCount");
    if (count < 2) {
        std::printf("fact skipped cross-context: fewer than two devices\n");
        return 0;
    }
    auto context1 = must(cudyn::PrimaryContext::activate(must(cudyn::Device::get(1), "Device::get(1)")), "activate 1");
    CUstream stream1 = nullptr;
    must(cudyn::call_driver(&DriverTable::cuStreamCreate_v2000, &stream1, unsigned{CU_STREAM_NON_BLOCKING}),
         "cuStreamCreate on device 1");
    constexpr std::size_t kBytes = 1 << 20;
    CUdeviceptr on1 = 0, on1b = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &on1, kBytes), "cuMemAlloc on 1");
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &on1b, kBytes), "cuMemAlloc on 1");
    CUevent event1 = nullptr;
    must(cudyn::call_driver(&DriverTable::cuEventCreate_v2000, &event1, unsigned{CU_EVENT_DISABLE_TIMING}), "event on 1");
    auto context0 = must(cudyn::PrimaryContext::activate(must(cudyn::Device::get(0), "Device::get(0)")),
                         "activate 0");  // device 0 current from here on
    CUdeviceptr on0 = 0;
    must(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &on0, kBytes), "cuMemAlloc on 0");
    void* pinned = nullptr;
    must(cudyn::call_driver(&DriverTable::cuMemHostAlloc_v2020, &pinned, kBytes, 0u), "cuMemHostAlloc");
    std::vector<unsigned char> pageable(kBytes);
    const auto report = [](const char* call, CUresult rc) {
        const CUresult synced = cu().cuCtxSynchronize_v2000();
        std::printf("fact cross-context %-40s rc=%s sync=%s\n", call, result_name(rc), result_name(synced));
    };
    report("cuMemsetD32Async (device 1 memory)", cu().cuMemsetD32Async_v3020(on1, 7u, kBytes / 4, stream1));
    report("cuMemsetD8Async (device 1 memory)", cu().cuMemsetD8Async_v3020(on1, 7, kBytes, stream1));
    report("cuMemcpyDtoDAsync_v2 (1 -> 1)", cu().cuMemcpyDtoDAsync_v3020(on1b, on1, kBytes, stream1));
    report("cuMemcpyDtoDAsync_v2 (0 -> 1)", cu().cuMemcpyDtoDAsync_v3020(on1, on0, kBytes, stream1));
    report("cuMemcpyHtoDAsync_v2 (pinned -> 1)", cu().cuMemcpyHtoDAsync_v3020(on1, pinned, kBytes, stream1));
    report("cuMemcpyHtoDAsync_v2 (pageable -> 1)", cu().cuMemcpyHtoDAsync_v3020(on1, pageable.data(), kBytes, stream1));
    report("cuMemcpyDtoHAsync_v2 (1 -> pinned)", cu().cuMemcpyDtoHAsync_v3020(pinned, on1, kBytes, stream1));
    report("cuMemcpyDtoHAsync_v2 (1 -> pageable)", cu().cuMemcpyDtoHAsync_v3020(pageable.data(), on1, kBytes, stream1));
    report("cuMemcpyDtoH_v2 (1 -> pageable, no stream)", cu().cuMemcpyDtoH_v3020(pageable.data(), on1, kBytes));
    report("cuMemcpyAsync (1 -> 1)", cu().cuMemcpyAsync_v4000(on1b, on1, kBytes, stream1));
    report("cuMemcpyPeerAsync (0 -> 1)",
           cu().cuMemcpyPeerAsync_v4000(on1, context1.handle(), on0, context0.handle(), kBytes, stream1));
    if (cu().cuMemcpyBatchAsync_v13000 != nullptr) {
        CUdeviceptr destinations[] = {on1b};
        CUdeviceptr sources[] = {on1};
        std::size_t sizes[] = {kBytes};
        CUmemcpyAttributes attributes{};
        attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        std::size_t first = 0;
        report("cuMemcpyBatchAsync_v2 (1 -> 1)",
               cu().cuMemcpyBatchAsync_v13000(destinations, sources, sizes, 1, &attributes, &first, 1, stream1));
    }
    report("cuEventRecord (device 1 event)", cu().cuEventRecord_v2000(event1, stream1));
    report("cuStreamSynchronize", cu().cuStreamSynchronize_v2000(stream1));
    report("cuStreamQuery", cu().cuStreamQuery_v2000(stream1));
    if (cu().cuStreamWriteValue32_v11070 != nullptr)
        report("cuStreamWriteValue32_v2 (device 1 memory)", cu().cuStreamWriteValue32_v11070(stream1, on1, 1u, 0u));
    if (cu().cuMemAllocFromPoolAsync_v11020 != nullptr) {
        CUdeviceptr pooled = 0;
        const CUresult rc = cu().cuMemAllocAsync_v11020(&pooled, kBytes, stream1);
        report("cuMemAllocAsync (device 1 stream)", rc);
        if (rc == CUDA_SUCCESS) {
            report("cuMemcpyDtoHAsync_v2 (1 pool -> pinned)", cu().cuMemcpyDtoHAsync_v3020(pinned, pooled, kBytes, stream1));
            report("cuMemcpyDtoHAsync_v2 (1 pool -> pageable)",
                   cu().cuMemcpyDtoHAsync_v3020(pageable.data(), pooled, kBytes, stream1));
            report("cuMemcpyHtoDAsync_v2 (pageable -> 1 pool)",
                   cu().cuMemcpyHtoDAsync_v3020(pooled, pageable.data(), kBytes, stream1));
            report("cuMemsetD32Async (1 pool)", cu().cuMemsetD32Async_v3020(pooled, 7u, kBytes / 4, stream1));
            report("cuMemFreeAsync (device 1 stream)", cu().cuMemFreeAsync_v11020(pooled, stream1));
        }
    }
    must(cudyn::call_driver(&DriverTable::cuMemFreeHost_v2000, pinned), "cuMemFreeHost");
    must(cudyn::call_driver(&DriverTable::cuMemFree_v3020, on0), "cuMemFree");
    must(context1.make_current(), "device 1 current");
    must(cudyn::call_driver(&DriverTable::cuCtxSynchronize_v2000), "sync 1");
    must(cudyn::call_driver(&DriverTable::cuMemFree_v3020, on1), "cuMemFree");
    must(cudyn::call_driver(&DriverTable::cuMemFree_v3020, on1b), "cuMemFree");
    must(cudyn::call_driver(&DriverTable::cuEventDestroy_v4000, event1), "cuEventDestroy");
    must(cudyn::call_driver(&DriverTable::cuStreamDestroy_v4000, stream1), "cuStreamDestroy");
    return 0;
}

struct Scenario {
    const char* name;
    int (*run)();
};
const Scenario kScenarios[] = {
    {"returns", scenario_returns},
    {"costs", scenario_costs},
    {"legacy-stream", scenario_legacy_stream},
    {"free-device", scenario_free_device},
    {"free-managed", scenario_free_managed},
    {"free-host", scenario_free_host},
    {"unregister", scenario_unregister},
    {"unmap", scenario_unmap},
    {"release-mapped", scenario_release_mapped},
    {"stream-destroy", scenario_stream_destroy},
    {"primary-release", scenario_primary_release},
    {"ipc-close", scenario_ipc_close},
    {"batch-timing", scenario_batch_timing},
    {"numa-locations", scenario_numa_locations},
    {"cross-context-stream", scenario_cross_context_stream},
};

int run_self(const std::vector<std::string>& arguments, int timeout_s) {
    std::vector<char*> argv;
    std::string self = "/proc/self/exe";
    argv.push_back(self.data());
    std::vector<std::string> copies = arguments;
    for (auto& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    pid_t pid = 0;
    if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) return 1;
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            std::printf("fact error %s: timed out\n", arguments.front().c_str());
            return 1;
        }
        ::usleep(10000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc == 3 && std::strcmp(argv[1], "ipc-close-child") == 0) return scenario_ipc_close_child(argv[2]);
    if (argc == 2) {
        for (const Scenario& s : kScenarios)
            if (std::strcmp(argv[1], s.name) == 0) return s.run();
        std::fprintf(stderr, "unknown scenario %s\n", argv[1]);
        return 2;
    }
    int failures = 0;
    for (const Scenario& s : kScenarios) {
        std::printf("== %s\n", s.name);
        failures += run_self({s.name}, 120) != 0;
    }
    return failures == 0 ? 0 : 1;
}
