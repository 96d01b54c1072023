// fakecuda_ipc.cpp — legacy IPC memory handles (cuIpcGetMemHandle /
// cuIpcOpenMemHandle / cuIpcCloseMemHandle) and interprocess events between
// real processes, so cudyn's sharing runs without a GPU: memory and event
// state live in memfds another process maps through /proc/<pid>/fd. Linux
// only; elsewhere the entries answer NOT_SUPPORTED and interprocess events
// stay within their process.
#include "fake_state.hpp"

#if defined(__linux__)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

namespace fake {

// The state of one interprocess event, in a memfd page its handle names as a
// memory handle names memory: a record in one process is seen by a query or
// wait in another. A record is pending until its stream reaches it, and while
// fakecuda_hold_events(1) holds it. Waits poll the page with the lock
// released, bounded: LAUNCH_FAILED when the recorder died with a record
// pending, LAUNCH_TIMEOUT after 60 s. Opened events count as IPC objects.
struct SharedEvent {
    char magic[8];
    std::atomic<std::uint64_t> recorded;   // sequence number of the last record
    std::atomic<std::uint64_t> completed;  // sequence number of the last completed record
    std::atomic<std::int32_t> recorder;    // process whose record is pending (0: none)
    std::int32_t creator_pid;              // the handle names the page as creator pid + fd + inode
    std::int32_t creator_fd;
    std::uint64_t inode;
    std::uint64_t device;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "event state is shared between processes");

}  // namespace fake

namespace {

using fake::Allocation;
using fake::Kind;
using fake::SharedEvent;
using fake::State;

constexpr char kMemMagic[8] = {'F', 'A', 'K', 'E', 'I', 'P', 'M', '1'};
constexpr char kEventMagic[8] = {'F', 'A', 'K', 'E', 'I', 'P', 'E', '1'};
constexpr char kPageMagic[8] = {'F', 'A', 'K', 'E', 'E', 'V', 'T', '1'};

// What a CUipcMemHandle holds: the exporter's memfd as pid + fd, and its
// inode (a freed allocation's fd number may be reused). The importer opens
// /proc/<pid>/fd/<fd> (same user, no ptrace attach) and maps it MAP_SHARED.
// Answers as the driver's: opened in the exporting process INVALID_CONTEXT;
// the same handle twice in one context ALREADY_MAPPED; freed memory, an
// exporter that exited, garbage bytes, or flags other than
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS INVALID_VALUE. Opened memory is a
// Kind::IpcOpened allocation until cuIpcCloseMemHandle or its context goes.
struct MemBlob {
    char magic[8];
    std::int32_t pid;
    std::int32_t fd;
    std::uint64_t inode;
    std::uint64_t device_id;  // st_dev of the memfd
    std::uint64_t size;
    std::uint64_t buffer_id;
    std::int32_t device;      // the CUDA device the memory is on
    std::int32_t unused;
    unsigned char pad[8];
};
static_assert(sizeof(MemBlob) == sizeof(CUipcMemHandle), "the blob fills CUipcMemHandle");

// What a CUipcEventHandle holds.
struct EventBlob {
    char magic[8];
    std::int32_t pid;
    std::int32_t fd;
    std::uint64_t inode;
    std::uint64_t device_id;
    unsigned char pad[32];
};
static_assert(sizeof(EventBlob) == sizeof(CUipcEventHandle), "the blob fills CUipcEventHandle");

// Which exported allocation an opened mapping is, and in which context.
struct OpenedKey {
    std::int32_t pid;
    std::uint64_t inode;
    std::uint64_t buffer_id;
    CUctx_st* ctx;
    bool operator==(const OpenedKey& o) const {
        return pid == o.pid && inode == o.inode && buffer_id == o.buffer_id && ctx == o.ctx;
    }
};

// Per-process IPC bookkeeping, guarded by State::mu like everything else.
struct Ipc {
    std::map<std::uintptr_t, OpenedKey> opened;  // base of a Kind::IpcOpened allocation -> what it is
    bool hold = false;                           // fakecuda_hold_events
    std::set<SharedEvent*> pending;              // records this process holds
};

Ipc& ipc() {
    static Ipc* i = new Ipc();  // never destroyed, like the State
    return *i;
}

}  // namespace

#if defined(__linux__)

namespace {

constexpr std::size_t kEventPage = 4096;

// Another process's descriptor, through /proc, if it is still the file the
// handle names; -1 otherwise (the process exited or the file was closed).
int open_named(std::int32_t pid, std::int32_t fd, std::uint64_t inode, std::uint64_t device_id) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(pid), static_cast<int>(fd));
    const int opened = ::open(path, O_RDWR | O_CLOEXEC);
    if (opened < 0) return -1;
    struct stat info {};
    if (::fstat(opened, &info) != 0 || static_cast<std::uint64_t>(info.st_ino) != inode ||
        static_cast<std::uint64_t>(info.st_dev) != device_id) {
        ::close(opened);
        return -1;
    }
    return opened;
}

// Alive and not a zombie.
bool process_alive(std::int32_t pid) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    std::FILE* stat = std::fopen(path, "r");
    if (stat == nullptr) return false;
    char line[512] = {};
    const bool read = std::fgets(line, sizeof line, stat) != nullptr;
    std::fclose(stat);
    const char* close_paren = read ? std::strrchr(line, ')') : nullptr;
    return close_paren == nullptr || close_paren[1] == '\0' || close_paren[2] != 'Z';
}

CUresult get_mem_handle(State& st, CUipcMemHandle* handle, CUdeviceptr dptr) {
    // Any address inside cuMemAlloc memory: the handle names the whole
    // allocation and the opener maps its base (an H200 with driver 580
    // exported an address 4 KiB inside one).
    const Allocation* found = fake::find_allocation(st, static_cast<std::uintptr_t>(dptr), 0);
    if (found == nullptr || found->kind != Kind::Device) return CUDA_ERROR_INVALID_VALUE;
    const Allocation& a = *found;
    struct stat info {};
    if (a.shared_fd < 0 || ::fstat(a.shared_fd, &info) != 0) return CUDA_ERROR_MAP_FAILED;
    MemBlob blob{};
    std::memcpy(blob.magic, kMemMagic, sizeof blob.magic);
    blob.pid = static_cast<std::int32_t>(::getpid());
    blob.fd = a.shared_fd;
    blob.inode = static_cast<std::uint64_t>(info.st_ino);
    blob.device_id = static_cast<std::uint64_t>(info.st_dev);
    blob.size = a.size;
    blob.buffer_id = a.buffer_id;
    blob.device = a.device;
    std::memcpy(handle, &blob, sizeof blob);
    return CUDA_SUCCESS;
}

CUresult open_mem_handle(State& st, CUdeviceptr* out, const CUipcMemHandle& handle, unsigned int flags) {
    if (!out || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    MemBlob blob{};
    std::memcpy(&blob, &handle, sizeof blob);
    if (std::memcmp(blob.magic, kMemMagic, sizeof blob.magic) != 0 || blob.size == 0) return CUDA_ERROR_INVALID_VALUE;
    if (blob.pid == static_cast<std::int32_t>(::getpid())) return CUDA_ERROR_INVALID_CONTEXT;  // as the driver answers
    if (blob.device >= 0 && blob.device < st.device_count && blob.device != ctx->device &&
        st.peer[ctx->device][blob.device] == 0)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    const OpenedKey key{blob.pid, blob.inode, blob.buffer_id, ctx};
    for (const auto& kv : ipc().opened) {
        auto live = st.allocs.find(kv.first);
        if (kv.second == key && live != st.allocs.end() && live->second.kind == Kind::IpcOpened)
            return CUDA_ERROR_ALREADY_MAPPED;
    }
    const int fd = open_named(blob.pid, blob.fd, blob.inode, blob.device_id);
    if (fd < 0) return CUDA_ERROR_INVALID_VALUE;  // freed, or the exporter exited
    struct stat info {};
    if (::fstat(fd, &info) != 0 || static_cast<std::uint64_t>(info.st_size) < blob.size) {
        ::close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    std::size_t mapping_size = 0;
    void* m = fake::map_memory(static_cast<std::size_t>(blob.size), &mapping_size, fd);
    ::close(fd);  // the mapping keeps the file
    if (!m) return CUDA_ERROR_MAP_FAILED;
    Allocation a;
    a.base = reinterpret_cast<std::uintptr_t>(m);
    a.size = static_cast<std::size_t>(blob.size);
    a.kind = Kind::IpcOpened;
    a.device = ctx->device;
    a.ctx = ctx;
    a.mapping = m;
    a.mapping_size = mapping_size;
    a.buffer_id = st.next_buffer_id++;
    // A stale record of an earlier mapping at this address (its context was destroyed) goes.
    ipc().opened[a.base] = key;
    st.allocs.emplace(a.base, std::move(a));
    *out = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(m));
    return CUDA_SUCCESS;
}

CUresult get_event_handle(State& st, CUipcEventHandle* handle, CUevent event) {
    if (st.events.count(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (!(event->flags & CU_EVENT_INTERPROCESS) || !event->ipc) return CUDA_ERROR_INVALID_VALUE;
    EventBlob blob{};
    std::memcpy(blob.magic, kEventMagic, sizeof blob.magic);
    blob.pid = event->ipc->creator_pid;
    blob.fd = event->ipc->creator_fd;
    blob.inode = event->ipc->inode;
    blob.device_id = event->ipc->device;
    std::memcpy(handle, &blob, sizeof blob);
    return CUDA_SUCCESS;
}

CUresult open_event_handle(State& st, CUevent* out, const CUipcEventHandle& handle) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = fake::current_context(st);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    EventBlob blob{};
    std::memcpy(&blob, &handle, sizeof blob);
    if (std::memcmp(blob.magic, kEventMagic, sizeof blob.magic) != 0) return CUDA_ERROR_INVALID_VALUE;
    const int fd = open_named(blob.pid, blob.fd, blob.inode, blob.device_id);
    if (fd < 0) return CUDA_ERROR_INVALID_VALUE;  // destroyed, or the exporter exited
    void* page = ::mmap(nullptr, kEventPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (page == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
    auto* shared = static_cast<SharedEvent*>(page);
    if (std::memcmp(shared->magic, kPageMagic, sizeof shared->magic) != 0) {
        ::munmap(page, kEventPage);
        return CUDA_ERROR_INVALID_VALUE;
    }
    auto* e = new CUevent_st;
    e->ctx = ctx;
    e->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
    e->ipc = shared;
    e->imported = true;
    st.events.insert(e);
    ++st.ipc_objects;
    *out = e;
    return CUDA_SUCCESS;
}

}  // namespace

namespace fake {

int shareable_memory_fd(std::size_t size) {
    if (size > (~std::size_t{0}) - kPageSize) return -1;
    const std::size_t length = (size + kPageSize - 1) / kPageSize * kPageSize;
    const int fd = ::memfd_create("fakecuda-mem", MFD_CLOEXEC);
    if (fd < 0) return -1;  // out of descriptors: the memory is anonymous, not shareable
    if (::ftruncate(fd, static_cast<off_t>(length)) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

CUresult ipc_event_create(CUevent_st* e) {
    if (!(e->flags & CU_EVENT_INTERPROCESS)) return CUDA_SUCCESS;
    const int fd = ::memfd_create("fakecuda-event", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct stat info {};
    void* page = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(kEventPage)) == 0 && ::fstat(fd, &info) == 0)
        page = ::mmap(nullptr, kEventPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    auto* shared = new (page) SharedEvent{};
    std::memcpy(shared->magic, kPageMagic, sizeof shared->magic);
    shared->creator_pid = static_cast<std::int32_t>(::getpid());
    shared->creator_fd = fd;
    shared->inode = static_cast<std::uint64_t>(info.st_ino);
    shared->device = static_cast<std::uint64_t>(info.st_dev);
    e->ipc = shared;
    return CUDA_SUCCESS;
}

IpcRecord ipc_event_record(CUevent_st* e) {
    if (!e->ipc) return {};
    const std::uint64_t sequence = e->ipc->recorded.fetch_add(1) + 1;
    e->ipc->recorder.store(static_cast<std::int32_t>(::getpid()));
    return {e->ipc, sequence};
}

void ipc_event_complete(const IpcRecord& record) {
    SharedEvent* shared = record.shared;
    if (!shared) return;
    if (ipc().hold) {
        ipc().pending.insert(shared);
        return;
    }
    std::uint64_t done = shared->completed.load();
    while (done < record.seq && !shared->completed.compare_exchange_weak(done, record.seq)) {
    }
    if (shared->completed.load() >= shared->recorded.load()) shared->recorder.store(0);
}

CUresult ipc_event_query(CUevent_st* e) {
    if (!e->ipc) return CUDA_SUCCESS;
    return e->ipc->completed.load() >= e->ipc->recorded.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

int ipc_event_reached(SharedEvent* shared, std::uint64_t target) {
    if (shared->completed.load() >= target) return 1;
    const std::int32_t recorder = shared->recorder.load();
    if (recorder != 0 && recorder != static_cast<std::int32_t>(::getpid()) && !process_alive(recorder)) return -1;
    return 0;
}

CUresult ipc_event_wait_target(CUevent_st* e, SharedEvent** shared, std::uint64_t* target) {
    *shared = nullptr;
    if (!e->ipc) return CUDA_SUCCESS;
    const std::uint64_t wanted = e->ipc->recorded.load();
    const int reached = ipc_event_reached(e->ipc, wanted);
    if (reached < 0) return CUDA_ERROR_LAUNCH_FAILED;
    if (reached == 0) {
        *shared = e->ipc;
        *target = wanted;
    }
    return CUDA_SUCCESS;
}

CUresult ipc_event_wait(State& st, CUevent_st* e) {
    if (!e->ipc) return CUDA_SUCCESS;
    SharedEvent* shared = e->ipc;
    const std::uint64_t target = shared->recorded.load();
    if (shared->completed.load() < target && ipc().pending.count(shared) != 0) {
        std::fprintf(stderr, "fakecuda: waiting on an event this process holds (fakecuda_hold_events)\n");
        return CUDA_ERROR_LAUNCH_TIMEOUT;
    }
    int reached = 0;
    const bool ended = fake::block_until(
        st, [&] { return (reached = ipc_event_reached(shared, target)) != 0; }, std::chrono::milliseconds(1));
    if (!ended) return CUDA_ERROR_LAUNCH_TIMEOUT;
    return reached > 0 ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}

}  // namespace fake

CUevent_st::~CUevent_st() {
    if (!ipc) return;
    ::ipc().pending.erase(ipc);
    if (imported)
        --fake::state().ipc_objects;  // the lock is held by whoever destroys events
    else
        ::close(ipc->creator_fd);
    ::munmap(ipc, kEventPage);
}

FAKE_API void fakecuda_hold_events(int on) {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    ipc().hold = on != 0;
    if (on) return;
    for (SharedEvent* shared : ipc().pending) {
        shared->recorder.store(0);
        shared->completed.store(shared->recorded.load());
    }
    ipc().pending.clear();
}

#else  // not Linux: no memfd, no /proc

namespace {
CUresult get_mem_handle(State&, CUipcMemHandle*, CUdeviceptr) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult open_mem_handle(State&, CUdeviceptr*, const CUipcMemHandle&, unsigned int) {
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult get_event_handle(State&, CUipcEventHandle*, CUevent) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult open_event_handle(State&, CUevent*, const CUipcEventHandle&) { return CUDA_ERROR_NOT_SUPPORTED; }
}  // namespace

namespace fake {
int shareable_memory_fd(std::size_t) { return -1; }
// Interprocess events work within their process: the stream work is their state.
CUresult ipc_event_create(CUevent_st*) { return CUDA_SUCCESS; }
IpcRecord ipc_event_record(CUevent_st*) { return {}; }
void ipc_event_complete(const IpcRecord&) {}
CUresult ipc_event_query(CUevent_st*) { return CUDA_SUCCESS; }
CUresult ipc_event_wait(State&, CUevent_st*) { return CUDA_SUCCESS; }
CUresult ipc_event_wait_target(CUevent_st*, SharedEvent** shared, std::uint64_t*) {
    *shared = nullptr;
    return CUDA_SUCCESS;
}
int ipc_event_reached(SharedEvent*, std::uint64_t) { return 1; }
}  // namespace fake

CUevent_st::~CUevent_st() = default;

FAKE_API void fakecuda_hold_events(int on) {
    State& st = fake::state();
    std::lock_guard<std::mutex> lock(st.mu);
    ipc().hold = on != 0;
}

#endif  // __linux__

// ---- entry points ---------------------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::current_context(st)) return CUDA_ERROR_INVALID_CONTEXT;
    return get_mem_handle(st, pHandle, dptr);
}

FAKE_API CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return open_mem_handle(fake::state(), pdptr, handle, Flags);
}

#if FAKE_HAS(11000)
FAKE_API CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return open_mem_handle(fake::state(), pdptr, handle, Flags);
}
#endif

FAKE_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!fake::current_context(st)) return CUDA_ERROR_INVALID_CONTEXT;
    const auto base = static_cast<std::uintptr_t>(dptr);
    auto it = st.allocs.find(base);
    if (it == st.allocs.end() || it->second.kind != Kind::IpcOpened) return CUDA_ERROR_INVALID_VALUE;
    // Like cuMemFree, the close waits for the context's work first (measured
    // on an H100: it returned only when a kernel writing the memory was done).
    if (CUresult rc = fake::wait_context(st, it->second.ctx)) return rc;
    it = st.allocs.find(base);
    if (it == st.allocs.end() || it->second.kind != Kind::IpcOpened) return CUDA_ERROR_INVALID_VALUE;
    ipc().opened.erase(it->first);
    fake::destroy_allocation(st, it);
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
    return get_event_handle(fake::state(), pHandle, event);
}

FAKE_API CUresult CUDAAPI cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
    FAKE_ENTER(fake::kNeedsInit);
    return open_event_handle(fake::state(), phEvent, handle);
}
