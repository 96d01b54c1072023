// fakenccl.cpp — a stand-in for libnccl.so.2 with the entries cudyn uses, for
// the suites on machines without a GPU. Its ranks are processes of one
// machine: ncclCommInitRank opens a POSIX shared-memory segment named after
// the unique id, and a collective copies each rank's elements into its slot
// there, meets the others at a barrier, and reduces or copies from the slots.
// The fake driver's device memory is host memory of each process, so a rank
// reads and writes its buffers directly. Collectives run at the call (the
// stream is not used) and hold at most kSlotBytes per rank.
//
// What it checks, as NCCL would refuse it or as a program must not do it:
//   - registration: a range overlapping one registered on the same
//     communicator is refused (ncclInvalidUsage); a handle or window it did
//     not give is refused (ncclInvalidArgument); the memory must be live in
//     the fake driver (cuMemGetAddressRange_v2 of the driver named by
//     CUDYN_DRIVER_PATH, already loaded; the allocation's buffer id tells
//     memory allocated again at the same address apart) at registration and
//     at deregistration: memory freed while registered is counted
//     (fakenccl_stale_deregistrations) and refused (ncclInvalidUsage);
//   - ncclCommDestroy with registrations left counts them
//     (fakenccl_dropped_registrations), as NCCL would silently drop them.
// Knobs, read at each call:
//   FAKENCCL_FAIL        "ncclCommRegister,ncclAllReduce,...": those entries answer ncclInternalError
//   FAKENCCL_TIMEOUT_MS  how long a rank waits at a barrier for the others (default 20000): ncclRemoteError
//   FAKENCCL_REQUIRE_REGISTERED=1  a collective whose buffers are not wholly covered by this
//                        communicator's registrations (adjacent ones together) answers ncclInvalidUsage
// The `old` variant is NCCL 2.19.3: no ncclCommWindowRegister / ncclCommWindowDeregister.
// Not modelled: streams, groups (ncclGroupStart/End only count), half and
// bfloat16 elements, window symmetry between ranks, ncclMemAlloc's VMM
// properties (it allocates with the fake driver's cuMemAlloc_v2).
// Its NCCL types and values are cudyn's own declarations (src/nccl/nccl_api.hpp).
#include "nccl/nccl_api.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#if defined(__GNUC__)
#define FAKENCCL_API extern "C" __attribute__((visibility("default")))
#else
#define FAKENCCL_API extern "C"
#endif

using namespace cudyn::nccl;

namespace {

#if defined(FAKENCCL_OLD)
constexpr int kVersion = 21903;
#else
constexpr int kVersion = 22803;
#endif
constexpr int kMaxRanks = 8;
constexpr std::size_t kSlotBytes = std::size_t{16} << 20;

struct Header {
    std::atomic<std::uint32_t> arrived;
    std::atomic<std::uint32_t> generation;
    std::atomic<std::int32_t> rank_count;
};
constexpr std::size_t kSlotsOffset = 4096;
constexpr std::size_t kSegmentBytes = kSlotsOffset + kMaxRanks * kSlotBytes;

struct Registration {
    std::uintptr_t address = 0;
    std::size_t bytes = 0;
    unsigned long long buffer_id = 0;  // the fake driver's, so memory freed and allocated again at the address is told apart
    bool window = false;
};

}  // namespace

struct cudyn::nccl::CommOpaque {
    int rank = 0;
    int rank_count = 0;
    Header* header = nullptr;
    unsigned char* slots = nullptr;
    bool finalized = false;
    std::map<void*, Registration> registrations;  // keyed by the handle given out
    std::string last_error;
};

namespace {

std::mutex mutex;  // the fake's bookkeeping, for programs that call from several threads
long stale_deregistrations = 0;
long dropped_registrations = 0;
long live_registrations = 0;
std::uintptr_t next_handle = 0x4e000000;

bool failing(const char* entry) {
    const char* list = std::getenv("FAKENCCL_FAIL");
    if (list == nullptr) return false;
    const std::string text = std::string(",") + list + ",";
    return text.find(std::string(",") + entry + ",") != std::string::npos;
}

int fail(CommOpaque* comm, int result, const std::string& why) {
    if (comm != nullptr) comm->last_error = why;
    return result;
}

// An entry of the fake driver the program loaded (CUDYN_DRIVER_PATH); null without one.
void* driver_entry(const char* name) {
    const char* path = std::getenv("CUDYN_DRIVER_PATH");
    void* driver = path != nullptr ? ::dlopen(path, RTLD_NOLOAD | RTLD_LAZY) : nullptr;
    return driver != nullptr ? ::dlsym(driver, name) : nullptr;
}

// The fake driver's buffer id of the live allocation holding all of
// [address, address + bytes); 0 when there is none. 1 without a driver.
unsigned long long live_buffer(std::uintptr_t address, std::size_t bytes) {
    using GetRange = int (*)(unsigned long long*, std::size_t*, unsigned long long);
    using GetAttribute = int (*)(void*, int, unsigned long long);
    static const auto get_range = reinterpret_cast<GetRange>(driver_entry("cuMemGetAddressRange_v2"));
    static const auto get_attribute = reinterpret_cast<GetAttribute>(driver_entry("cuPointerGetAttribute"));
    if (get_range == nullptr || get_attribute == nullptr) return 1;
    unsigned long long base = 0;
    std::size_t size = 0;
    if (get_range(&base, &size, address) != 0) return 0;
    if (address < base || bytes > size - (address - base)) return 0;
    constexpr int kBufferIdAttribute = 7;  // CU_POINTER_ATTRIBUTE_BUFFER_ID
    unsigned long long id = 0;
    if (get_attribute(&id, kBufferIdAttribute, address) != 0) return 0;
    return id;
}

std::string segment_name(const UniqueIdBytes& id) {
    std::string name = "/fakenccl-";
    static const char* digits = "0123456789abcdef";
    for (int i = 0; i < 16; ++i) {
        const auto byte = static_cast<unsigned char>(id.internal[i]);
        name += digits[byte >> 4];
        name += digits[byte & 15];
    }
    return name;
}

// Every rank arrives before any leaves; false when the others did not come in time.
bool barrier(CommOpaque* comm) {
    Header* header = comm->header;
    const std::uint32_t generation = header->generation.load();
    if (header->arrived.fetch_add(1) + 1 == static_cast<std::uint32_t>(comm->rank_count)) {
        header->arrived.store(0);
        header->generation.fetch_add(1);
        return true;
    }
    const char* timeout_text = std::getenv("FAKENCCL_TIMEOUT_MS");
    const long timeout_ms = timeout_text != nullptr ? std::atol(timeout_text) : 20000;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (header->generation.load() == generation) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
}

std::size_t element_size(int type) {
    switch (type) {
        case kInt8: case kUint8: return 1;
        case kInt32: case kUint32: case kFloat32: return 4;
        case kInt64: case kUint64: case kFloat64: return 8;
        default: return 0;
    }
}

template <typename T>
void reduce_as(void* out, const unsigned char* slots, int ranks, std::size_t count, int op) {
    T* result = static_cast<T*>(out);
    for (std::size_t i = 0; i < count; ++i) {
        T value = reinterpret_cast<const T*>(slots)[i];
        for (int r = 1; r < ranks; ++r) {
            const T other = reinterpret_cast<const T*>(slots + static_cast<std::size_t>(r) * kSlotBytes)[i];
            switch (op) {
                case kSum: case kAvg: value = static_cast<T>(value + other); break;
                case kProd: value = static_cast<T>(value * other); break;
                case kMax: value = other > value ? other : value; break;
                case kMin: value = other < value ? other : value; break;
                default: break;
            }
        }
        if (op == kAvg) value = static_cast<T>(value / static_cast<T>(ranks));
        result[i] = value;
    }
}

void reduce(void* out, const unsigned char* slots, int ranks, std::size_t count, int type, int op) {
    switch (type) {
        case kInt8: reduce_as<std::int8_t>(out, slots, ranks, count, op); break;
        case kUint8: reduce_as<std::uint8_t>(out, slots, ranks, count, op); break;
        case kInt32: reduce_as<std::int32_t>(out, slots, ranks, count, op); break;
        case kUint32: reduce_as<std::uint32_t>(out, slots, ranks, count, op); break;
        case kInt64: reduce_as<std::int64_t>(out, slots, ranks, count, op); break;
        case kUint64: reduce_as<std::uint64_t>(out, slots, ranks, count, op); break;
        case kFloat32: reduce_as<float>(out, slots, ranks, count, op); break;
        case kFloat64: reduce_as<double>(out, slots, ranks, count, op); break;
        default: break;
    }
}

// [address, address + bytes) wholly inside registrations of `comm`, adjacent ones together.
bool covered(const CommOpaque* comm, const void* buffer, std::size_t bytes) {
    std::uintptr_t at = reinterpret_cast<std::uintptr_t>(buffer);
    const std::uintptr_t end = at + bytes;
    std::lock_guard<std::mutex> lock(mutex);
    while (at < end) {
        bool advanced = false;
        for (const auto& entry : comm->registrations) {
            const Registration& registration = entry.second;
            if (registration.address <= at && at < registration.address + registration.bytes) {
                at = registration.address + registration.bytes;
                advanced = true;
            }
        }
        if (!advanced) return false;
    }
    return true;
}

bool registration_required() {
    const char* value = std::getenv("FAKENCCL_REQUIRE_REGISTERED");
    return value != nullptr && std::strcmp(value, "1") == 0;
}

// The checks every collective makes; ncclSuccess when it may run.
int check_collective(CommOpaque* comm, const char* entry, const void* send, void* receive, std::size_t count,
                     int type, std::size_t* bytes) {
    if (comm == nullptr || comm->header == nullptr) return kInvalidArgument;
    if (comm->finalized) return fail(comm, kInvalidUsage, std::string(entry) + " after ncclCommFinalize");
    if (failing(entry)) return fail(comm, kInternalError, std::string("FAKENCCL_FAIL names ") + entry);
    const std::size_t size = element_size(type);
    if (size == 0) return fail(comm, kInvalidArgument, "the fake NCCL models no data type " + std::to_string(type));
    if (count > kSlotBytes / size) return fail(comm, kInvalidArgument, "more than the fake's 16 MiB per rank");
    *bytes = count * size;
    if (registration_required() && !(covered(comm, send, *bytes) && covered(comm, receive, *bytes)))
        return fail(comm, kInvalidUsage, std::string(entry) + " on memory not wholly registered");
    return kSuccess;
}

}  // namespace

FAKENCCL_API int ncclGetVersion(int* version) {
    if (version == nullptr) return kInvalidArgument;
    *version = kVersion;
    return kSuccess;
}

FAKENCCL_API const char* ncclGetErrorString(int result) {
    switch (result) {
        case kSuccess: return "no error";
        case kUnhandledCudaError: return "unhandled cuda error";
        case kSystemError: return "unhandled system error";
        case kInternalError: return "internal error";
        case kInvalidArgument: return "invalid argument";
        case kInvalidUsage: return "invalid usage";
        case kRemoteError: return "remote process exited or there was a network error";
        case kInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

FAKENCCL_API const char* ncclGetLastError(Comm comm) { return comm != nullptr ? comm->last_error.c_str() : ""; }

FAKENCCL_API int ncclGetUniqueId(UniqueIdBytes* id) {
    if (id == nullptr) return kInvalidArgument;
    if (failing("ncclGetUniqueId")) return kSystemError;
    std::memset(id->internal, 0, sizeof id->internal);
    std::random_device random;
    for (int i = 0; i < 16; i += 4) {
        const std::uint32_t word = random();
        std::memcpy(id->internal + i, &word, 4);
    }
    return kSuccess;
}

FAKENCCL_API int ncclCommInitRank(Comm* out, int rank_count, UniqueIdBytes id, int rank) {
    if (out == nullptr || rank_count < 1 || rank_count > kMaxRanks || rank < 0 || rank >= rank_count)
        return kInvalidArgument;
    if (failing("ncclCommInitRank")) return kInternalError;
    const std::string name = segment_name(id);
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) return kSystemError;
    if (::ftruncate(fd, static_cast<off_t>(kSegmentBytes)) != 0) {
        ::close(fd);
        return kSystemError;
    }
    void* mapped = ::mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED) return kSystemError;
    auto* comm = new CommOpaque;
    comm->rank = rank;
    comm->rank_count = rank_count;
    comm->header = static_cast<Header*>(mapped);
    comm->slots = static_cast<unsigned char*>(mapped) + kSlotsOffset;
    // The segment starts zeroed (ftruncate): the first rank in sets the count.
    std::int32_t expected = 0;
    comm->header->rank_count.compare_exchange_strong(expected, rank_count);
    const bool agreed = comm->header->rank_count.load() == rank_count;
    const bool joined = agreed && barrier(comm);
    if (rank == 0 || !joined) ::shm_unlink(name.c_str());  // every rank has it open once all joined
    if (!joined) {
        ::munmap(mapped, kSegmentBytes);
        delete comm;
        return agreed ? kRemoteError : kInvalidArgument;
    }
    *out = comm;
    return kSuccess;
}

FAKENCCL_API int ncclCommFinalize(Comm comm) {
    if (comm == nullptr) return kInvalidArgument;
    if (failing("ncclCommFinalize")) return fail(comm, kInternalError, "FAKENCCL_FAIL names ncclCommFinalize");
    comm->finalized = true;
    return kSuccess;
}

FAKENCCL_API int ncclCommDestroy(Comm comm) {
    if (comm == nullptr) return kInvalidArgument;
    {
        std::lock_guard<std::mutex> lock(mutex);
        dropped_registrations += static_cast<long>(comm->registrations.size());
        live_registrations -= static_cast<long>(comm->registrations.size());
    }
    ::munmap(comm->header, kSegmentBytes);
    delete comm;
    return kSuccess;
}

namespace {

int register_range(Comm comm, void* buffer, std::size_t bytes, void** handle, bool window, const char* entry) {
    if (comm == nullptr || buffer == nullptr || bytes == 0 || handle == nullptr) return kInvalidArgument;
    if (failing(entry)) return fail(comm, kInternalError, std::string("FAKENCCL_FAIL names ") + entry);
    const auto address = reinterpret_cast<std::uintptr_t>(buffer);
    const unsigned long long buffer_id = live_buffer(address, bytes);
    if (buffer_id == 0) return fail(comm, kInvalidArgument, "the buffer is not live device memory");
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [known, registration] : comm->registrations)
        if (address < registration.address + registration.bytes && registration.address < address + bytes)
            return fail(comm, kInvalidUsage, "the range overlaps one registered already");
    *handle = reinterpret_cast<void*>(next_handle += 0x10);
    comm->registrations[*handle] = Registration{address, bytes, buffer_id, window};
    ++live_registrations;
    return kSuccess;
}

int deregister_handle(Comm comm, void* handle, bool window, const char* entry) {
    if (comm == nullptr) return kInvalidArgument;
    if (failing(entry)) return fail(comm, kInternalError, std::string("FAKENCCL_FAIL names ") + entry);
    std::lock_guard<std::mutex> lock(mutex);
    auto found = comm->registrations.find(handle);
    if (found == comm->registrations.end() || found->second.window != window)
        return fail(comm, kInvalidArgument, "no such registration");
    if (live_buffer(found->second.address, found->second.bytes) != found->second.buffer_id) {
        ++stale_deregistrations;
        --live_registrations;
        comm->registrations.erase(found);
        return fail(comm, kInvalidUsage, "the registered memory was freed before its deregistration");
    }
    comm->registrations.erase(found);
    --live_registrations;
    return kSuccess;
}

}  // namespace

FAKENCCL_API int ncclCommRegister(Comm comm, void* buffer, std::size_t bytes, void** handle) {
    return register_range(comm, buffer, bytes, handle, false, "ncclCommRegister");
}

FAKENCCL_API int ncclCommDeregister(Comm comm, void* handle) {
    return deregister_handle(comm, handle, false, "ncclCommDeregister");
}

#if !defined(FAKENCCL_OLD)
FAKENCCL_API int ncclCommWindowRegister(Comm comm, void* buffer, std::size_t bytes, Window* window, int flags) {
    if (flags != 0 && flags != kWinCollSymmetric) return fail(comm, kInvalidArgument, "unknown window flags");
    void* handle = nullptr;
    const int result = register_range(comm, buffer, bytes, &handle, true, "ncclCommWindowRegister");
    if (result == kSuccess) *window = static_cast<Window>(handle);
    return result;
}

FAKENCCL_API int ncclCommWindowDeregister(Comm comm, Window window) {
    return deregister_handle(comm, window, true, "ncclCommWindowDeregister");
}
#endif

FAKENCCL_API int ncclAllReduce(const void* send, void* receive, std::size_t count, int type, int op, Comm comm,
                               CUstream_st*) {
    std::size_t bytes = 0;
    if (const int checked = check_collective(comm, "ncclAllReduce", send, receive, count, type, &bytes); checked != kSuccess)
        return checked;
    if (op < kSum || op > kAvg) return fail(comm, kInvalidArgument, "unknown reduction");
    std::memcpy(comm->slots + static_cast<std::size_t>(comm->rank) * kSlotBytes, send, bytes);
    if (!barrier(comm)) return fail(comm, kRemoteError, "a rank did not reach the all-reduce");
    reduce(receive, comm->slots, comm->rank_count, count, type, op);
    if (!barrier(comm)) return fail(comm, kRemoteError, "a rank did not finish the all-reduce");
    return kSuccess;
}

FAKENCCL_API int ncclBroadcast(const void* send, void* receive, std::size_t count, int type, int root, Comm comm,
                               CUstream_st*) {
    std::size_t bytes = 0;
    if (const int checked = check_collective(comm, "ncclBroadcast", comm != nullptr && comm->rank == root ? send : receive, receive, count, type, &bytes); checked != kSuccess)
        return checked;
    if (root < 0 || root >= comm->rank_count) return fail(comm, kInvalidArgument, "root out of range");
    unsigned char* slot = comm->slots + static_cast<std::size_t>(root) * kSlotBytes;
    if (comm->rank == root) std::memcpy(slot, send, bytes);
    if (!barrier(comm)) return fail(comm, kRemoteError, "a rank did not reach the broadcast");
    if (comm->rank != root || receive != send) std::memcpy(receive, slot, bytes);
    if (!barrier(comm)) return fail(comm, kRemoteError, "a rank did not finish the broadcast");
    return kSuccess;
}

FAKENCCL_API int ncclMemAlloc(void** pointer, std::size_t bytes) {
    using Alloc = int (*)(unsigned long long*, std::size_t);
    const auto alloc = reinterpret_cast<Alloc>(driver_entry("cuMemAlloc_v2"));
    unsigned long long address = 0;
    if (pointer == nullptr || alloc == nullptr || alloc(&address, bytes) != 0) return kUnhandledCudaError;
    *pointer = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
    return kSuccess;
}

FAKENCCL_API int ncclMemFree(void* pointer) {
    using Free = int (*)(unsigned long long);
    const auto free_memory = reinterpret_cast<Free>(driver_entry("cuMemFree_v2"));
    if (free_memory == nullptr || free_memory(reinterpret_cast<std::uintptr_t>(pointer)) != 0) return kUnhandledCudaError;
    return kSuccess;
}

namespace {
std::atomic<int> open_groups{0};
}  // namespace

FAKENCCL_API int ncclGroupStart() {
    ++open_groups;
    return kSuccess;
}

FAKENCCL_API int ncclGroupEnd() {
    return --open_groups < 0 ? (open_groups = 0, kInvalidUsage) : kSuccess;
}

// ---- the probe: what a test reads back -------------------------------------------------------

FAKENCCL_API long fakenccl_live_registrations() {
    std::lock_guard<std::mutex> lock(mutex);
    return live_registrations;
}

FAKENCCL_API long fakenccl_stale_deregistrations() {
    std::lock_guard<std::mutex> lock(mutex);
    return stale_deregistrations;
}

FAKENCCL_API long fakenccl_dropped_registrations() {
    std::lock_guard<std::mutex> lock(mutex);
    return dropped_registrations;
}
