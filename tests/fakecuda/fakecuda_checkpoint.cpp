// fakecuda_checkpoint.cpp — checkpoint and restore of a whole process
// (cuCheckpointProcess*), across fake processes.
//
// Every initialised fake process serves requests about itself on an abstract
// unix socket named after its pid; the cuCheckpointProcess* entries of a
// controlling process connect to it. The target follows the driver's state
// machine: running -> locked (its API calls block: the service holds the
// fake's lock) -> checkpointed (device memory saved to host memory, the
// device bytes cleared and the device's memory given back) -> locked again
// by a restore (the bytes put back, optionally onto other devices by UUID
// pairs: the ordinals stay, the devices behind them change) -> running.
// Calls from the wrong state answer CUDA_ERROR_ILLEGAL_STATE. A lock that
// cannot take the target within its timeout answers CUDA_ERROR_TIMEOUT and
// leaves it running. FAKECUDA_CHECKPOINT_FAIL=<lock|checkpoint|restore|unlock>
// in the target makes that step answer CUDA_ERROR_UNKNOWN and change nothing
// (a failed restore leaves the target checkpointed, its API locked).
// Linux only (abstract sockets); elsewhere the entries answer NOT_SUPPORTED.
#include "fake_state.hpp"
#include "fake_thread.hpp"

#if FAKE_HAS(12080)

#if defined(__linux__)
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

using fake::State;

namespace {

enum Op : int { kGetState = 1, kGetRestoreThreadId, kLock, kCheckpoint, kRestore, kUnlock };
const char* const kStepNames[] = {"", "", "", "lock", "checkpoint", "restore", "unlock"};

struct Request {
    int op = 0;
    unsigned timeout_ms = 0;
    unsigned pair_count = 0;
    CUcheckpointGpuPair pairs[fake::kMaxDevices] = {};
};

struct Reply {
    CUresult rc = CUDA_SUCCESS;
    int value = 0;  // the state, or the restore thread's id
};

// This process as a target. Touched only by the service thread.
struct Target {
    CUprocessState state = CU_PROCESS_STATE_RUNNING;
    std::unique_lock<std::mutex> api_lock;  // the fake's lock while locked: API calls block
    struct Saved {
        std::uintptr_t base;
        std::vector<unsigned char> bytes;
    };
    std::vector<Saved> saved;
    std::array<unsigned long long, fake::kMaxDevices> saved_in_use{};
    int thread_id = 0;
    int failing_step = 0;
};

sockaddr_un service_address(int pid, socklen_t* length) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const int n = std::snprintf(address.sun_path + 1, sizeof address.sun_path - 1, "fakecuda-checkpoint-%d", pid);
    *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<std::size_t>(n));
    return address;
}

// The process's own device memory. Memory imported from another process
// (legacy IPC opens, imported VMM mappings and pool pointers) is the exporter's: clearing it
// would clear the exporter's bytes, so it is left alone. Whether the real
// driver refuses to checkpoint a process that still maps such memory
// depends on its version and is not modelled.
bool holds_device_bytes(const fake::Allocation& a) {
    if (a.imported) return false;
    return a.kind == fake::Kind::Device || a.kind == fake::Kind::Pool || a.kind == fake::Kind::Managed ||
           (a.kind == fake::Kind::VmmMapped && !a.host_memory);
}

CUresult lock(Target& t, State& st, unsigned timeout_ms) {
    if (t.state != CU_PROCESS_STATE_RUNNING) return CUDA_ERROR_ILLEGAL_STATE;
    std::unique_lock<std::mutex> held(st.mu, std::defer_lock);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!held.try_lock()) {
        if (timeout_ms != 0 && std::chrono::steady_clock::now() >= deadline) return CUDA_ERROR_TIMEOUT;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    t.api_lock = std::move(held);
    t.state = CU_PROCESS_STATE_LOCKED;
    return CUDA_SUCCESS;
}

CUresult checkpoint(Target& t, State& st) {
    if (t.state != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
    t.saved.clear();
    for (auto& [base, a] : st.allocs) {
        if (!holds_device_bytes(a)) continue;
        auto* bytes = reinterpret_cast<unsigned char*>(base);
        t.saved.push_back({base, std::vector<unsigned char>(bytes, bytes + a.size)});
        std::memset(bytes, 0, a.size);
    }
    for (int d = 0; d < fake::kMaxDevices; ++d) {
        t.saved_in_use[static_cast<std::size_t>(d)] = st.devices[static_cast<std::size_t>(d)].bytes_in_use;
        st.devices[static_cast<std::size_t>(d)].bytes_in_use = 0;
    }
    t.state = CU_PROCESS_STATE_CHECKPOINTED;
    return CUDA_SUCCESS;
}

// The devices behind the ordinals after the pairs' moves; false when a pair
// names a device that is not there (old: not behind an ordinal; new: not
// on this machine) or two ordinals would share a device.
bool remapped(const State& st, const Request& r, std::array<int, fake::kMaxDevices>* out) {
    *out = st.physical;
    for (unsigned i = 0; i < r.pair_count; ++i) {
        const int from = fake::physical_of_uuid(st, r.pairs[i].oldUuid);
        const int to = fake::physical_of_uuid(st, r.pairs[i].newUuid);
        if (from < 0 || to < 0) return false;
        bool found = false;
        for (int o = 0; o < st.device_count; ++o) {
            if (st.physical[static_cast<std::size_t>(o)] == from) {
                (*out)[static_cast<std::size_t>(o)] = to;
                found = true;
            }
        }
        if (!found) return false;
    }
    for (int a = 0; a < st.device_count; ++a)
        for (int b = a + 1; b < st.device_count; ++b)
            if ((*out)[static_cast<std::size_t>(a)] == (*out)[static_cast<std::size_t>(b)]) return false;
    return true;
}

CUresult restore(Target& t, State& st, const Request& r) {
    if (t.state != CU_PROCESS_STATE_CHECKPOINTED) return CUDA_ERROR_ILLEGAL_STATE;
    std::array<int, fake::kMaxDevices> physical{};
    if (r.pair_count > static_cast<unsigned>(fake::kMaxDevices) || !remapped(st, r, &physical))
        return CUDA_ERROR_INVALID_VALUE;
    for (const Target::Saved& s : t.saved) std::memcpy(reinterpret_cast<void*>(s.base), s.bytes.data(), s.bytes.size());
    t.saved.clear();
    for (int d = 0; d < fake::kMaxDevices; ++d)
        st.devices[static_cast<std::size_t>(d)].bytes_in_use = t.saved_in_use[static_cast<std::size_t>(d)];
    st.physical = physical;
    t.state = CU_PROCESS_STATE_LOCKED;
    return CUDA_SUCCESS;
}

CUresult unlock(Target& t) {
    if (t.state != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
    t.api_lock.unlock();
    t.api_lock = std::unique_lock<std::mutex>();
    t.state = CU_PROCESS_STATE_RUNNING;
    return CUDA_SUCCESS;
}

Reply answer(Target& t, const Request& r) {
    State& st = fake::state();
    Reply reply;
    if (r.op >= kLock && r.op <= kUnlock && r.op == t.failing_step) {
        reply.rc = CUDA_ERROR_UNKNOWN;
    } else {
        switch (r.op) {
        case kGetState: break;
        case kGetRestoreThreadId: reply.value = t.thread_id; break;
        case kLock: reply.rc = lock(t, st, r.timeout_ms); break;
        case kCheckpoint: reply.rc = checkpoint(t, st); break;
        case kRestore: reply.rc = restore(t, st, r); break;
        case kUnlock: reply.rc = unlock(t); break;
        default: reply.rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (r.op != kGetRestoreThreadId) reply.value = static_cast<int>(t.state);
    return reply;
}

void serve(int listener) {
    Target target;
    target.thread_id = static_cast<int>(::syscall(SYS_gettid));
    if (const char* step = std::getenv("FAKECUDA_CHECKPOINT_FAIL")) {
        for (int op = kLock; op <= kUnlock; ++op)
            if (std::strcmp(step, kStepNames[op]) == 0) target.failing_step = op;
        if (target.failing_step == 0)
            std::fprintf(stderr, "fakecuda: FAKECUDA_CHECKPOINT_FAIL: '%s' is none of lock, checkpoint, restore, unlock\n",
                         step);
    }
    for (;;) {
        const int peer = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (peer < 0) continue;
        Request request;
        if (::recv(peer, &request, sizeof request, MSG_WAITALL) == static_cast<ssize_t>(sizeof request)) {
            const Reply reply = answer(target, request);
            (void)::send(peer, &reply, sizeof reply, MSG_NOSIGNAL);
        }
        ::close(peer);
    }
}

// Asks process `pid`'s service; INVALID_VALUE when no fake CUDA process
// serves that pid.
CUresult ask(int pid, const Request& request, Reply* reply) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    socklen_t length = 0;
    const sockaddr_un address = service_address(pid, &length);
    bool answered = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0 &&
                    ::send(fd, &request, sizeof request, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof request) &&
                    ::recv(fd, reply, sizeof *reply, MSG_WAITALL) == static_cast<ssize_t>(sizeof *reply);
    ::close(fd);
    return answered ? reply->rc : CUDA_ERROR_INVALID_VALUE;
}

// A step asked of another process. The caller's own process is not a target
// (it would lock itself): INVALID_VALUE.
CUresult step(int pid, const Request& request) {
    if (pid <= 0 || pid == static_cast<int>(::getpid())) return CUDA_ERROR_INVALID_VALUE;
    Reply reply;
    return ask(pid, request, &reply);
}

}  // namespace

void fake::start_checkpoint_service() {
    static std::once_flag started;
    std::call_once(started, [] {
        const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listener < 0) return;
        socklen_t length = 0;
        const sockaddr_un address = service_address(static_cast<int>(::getpid()), &length);
        if (::bind(listener, reinterpret_cast<const sockaddr*>(&address), length) != 0 || ::listen(listener, 4) != 0) {
            ::close(listener);
            return;
        }
        const auto run = [](void* socket) { serve(static_cast<int>(reinterpret_cast<std::intptr_t>(socket))); };
        if (!fake::start_detached(run, reinterpret_cast<void*>(static_cast<std::intptr_t>(listener)))) ::close(listener);
    });
}

FAKE_API CUresult CUDAAPI cuCheckpointProcessGetState(int pid, CUprocessState* state) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!state || pid <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (pid == static_cast<int>(::getpid())) {  // the caller is running: it is making this call
        *state = CU_PROCESS_STATE_RUNNING;
        return CUDA_SUCCESS;
    }
    Request request;
    request.op = kGetState;
    Reply reply;
    const CUresult rc = ask(pid, request, &reply);
    if (rc == CUDA_SUCCESS) *state = static_cast<CUprocessState>(reply.value);
    return rc;
}

FAKE_API CUresult CUDAAPI cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) {
    FAKE_ENTER(fake::kNeedsInit);
    if (!tid || pid <= 0) return CUDA_ERROR_INVALID_VALUE;
    Request request;
    request.op = kGetRestoreThreadId;
    Reply reply;
    const CUresult rc = ask(pid, request, &reply);
    if (rc == CUDA_SUCCESS) *tid = reply.value;
    return rc;
}

FAKE_API CUresult CUDAAPI cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
    FAKE_ENTER(fake::kNeedsInit);
    Request request;
    request.op = kLock;
    if (args) {
        if (args->reserved0 != 0) return CUDA_ERROR_INVALID_VALUE;
        for (cuuint64_t word : args->reserved1)
            if (word != 0) return CUDA_ERROR_INVALID_VALUE;
        request.timeout_ms = args->timeoutMs;
    }
    return step(pid, request);
}

FAKE_API CUresult CUDAAPI cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs* args) {
    FAKE_ENTER(fake::kNeedsInit);
    if (args)
        for (cuuint64_t word : args->reserved)
            if (word != 0) return CUDA_ERROR_INVALID_VALUE;
    Request request;
    request.op = kCheckpoint;
    return step(pid, request);
}

FAKE_API CUresult CUDAAPI cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
    FAKE_ENTER(fake::kNeedsInit);
    Request request;
    request.op = kRestore;
    if (args) {
        // Before 13.0 the whole argument block was reserved: GPU pairs are
        // nonzero reserved words there.
        if (!FAKE_HAS(13000) && (args->gpuPairs != nullptr || args->gpuPairsCount != 0)) return CUDA_ERROR_INVALID_VALUE;
        if (args->gpuPairsCount > static_cast<unsigned>(fake::kMaxDevices) ||
            (args->gpuPairsCount != 0 && args->gpuPairs == nullptr))
            return CUDA_ERROR_INVALID_VALUE;
        request.pair_count = args->gpuPairsCount;
        for (unsigned i = 0; i < args->gpuPairsCount; ++i) request.pairs[i] = args->gpuPairs[i];
    }
    return step(pid, request);
}

FAKE_API CUresult CUDAAPI cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs* args) {
    FAKE_ENTER(fake::kNeedsInit);
    if (args)
        for (cuuint64_t word : args->reserved)
            if (word != 0) return CUDA_ERROR_INVALID_VALUE;
    Request request;
    request.op = kUnlock;
    return step(pid, request);
}

#else  // not Linux: no process can serve another

void fake::start_checkpoint_service() {}

FAKE_API CUresult CUDAAPI cuCheckpointProcessGetState(int, CUprocessState*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
FAKE_API CUresult CUDAAPI cuCheckpointProcessGetRestoreThreadId(int, int*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
FAKE_API CUresult CUDAAPI cuCheckpointProcessLock(int, CUcheckpointLockArgs*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
FAKE_API CUresult CUDAAPI cuCheckpointProcessCheckpoint(int, CUcheckpointCheckpointArgs*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
FAKE_API CUresult CUDAAPI cuCheckpointProcessRestore(int, CUcheckpointRestoreArgs*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
FAKE_API CUresult CUDAAPI cuCheckpointProcessUnlock(int, CUcheckpointUnlockArgs*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#endif

#else  // before 12.8: the entries do not exist

void fake::start_checkpoint_service() {}

#endif
