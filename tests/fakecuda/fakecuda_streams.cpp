// fakecuda_streams.cpp — stream work that runs later, as on a GPU: each
// stream is a queue of work that one worker thread runs in order once its
// dependencies are done (the legacy stream's implicit synchronization,
// cuStreamWaitEvent), so calls return before their work ran and cudyn's
// waits and teardown meet pending work.
#include "fake_state.hpp"
#include "fake_thread.hpp"

#include <algorithm>

namespace fake {

namespace {

// condition_variable::wait_until on steady_clock, through a system_clock
// deadline: libstdc++ waits on a steady_clock deadline with
// pthread_cond_clockwait (glibc 2.30), which the installed fake may not need
// (the release's glibc 2.28 floor); pthread_cond_timedwait is older. Each wait
// lasts at most 50 ms (longer only by however far the system clock is set back
// meanwhile) and the callers' loops re-check the steady deadline, so a clock
// change shifts no deadline.
void wait_until(std::condition_variable& condition, std::unique_lock<std::mutex>& lock,
                std::chrono::steady_clock::time_point deadline) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    const auto step = std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50));
    condition.wait_until(lock, std::chrono::system_clock::now() +
                                   std::chrono::duration_cast<std::chrono::system_clock::duration>(step));
}

constexpr auto kLongestWait = std::chrono::seconds(60);

bool dependencies_met(State& st, Work& work, bool* polling) {
    for (const Dependency& d : work.after)
        if (d.queue->completed < d.seq) return false;
    // Another process's record: polled (its completion notifies no one here).
    // A recorder that died counts as an end: the work itself then fails.
    if (work.ipc_event != nullptr && ipc_event_reached(work.ipc_event, work.ipc_target) == 0) {
        *polling = true;
        return false;
    }
    // A value wait: polled like another process's record; once it is past
    // its deadline the work runs as a failure instead.
    if (work.until) {
        const auto now = std::chrono::steady_clock::now();
        if (!work.until_armed) {
            work.until_armed = true;
            work.until_deadline = now + std::chrono::milliseconds(st.stream_wait_timeout_ms);
        }
        if (!work.until(st)) {
            if (now < work.until_deadline) {
                *polling = true;
                return false;
            }
            work.task = [](State&) { return CUDA_ERROR_LAUNCH_TIMEOUT; };
        }
        work.until = nullptr;
    }
    return true;
}

// The one worker: runs every queue's ready head, oldest-ready first, until
// the process ends. Never joined (the state is never destroyed either). A
// task that finds its memory gone answers an error: its context fails with
// it, sticky as a GPU fault leaves a context, and the rest of its work is
// dropped.
void worker_main() {
    State& st = state();
    std::unique_lock<std::mutex> lock(st.mu);
    std::size_t rotate = 0;
    for (;;) {
        const auto now = std::chrono::steady_clock::now();
        bool ran = false;
        bool polling = false;
        auto next = std::chrono::steady_clock::time_point::max();
        const std::size_t n = st.queues.size();
        for (std::size_t k = 0; k < n && !ran; ++k) {
            const std::shared_ptr<Queue> queue = st.queues[(rotate + k) % n];
            if (queue->pending.empty()) continue;
            Work& head = queue->pending.front();
            // A failed context runs nothing more; a driver at exit neither.
            const bool drop = queue->ctx->sticky != CUDA_SUCCESS || st.deinitialized;
            if (!drop) {
                if (!dependencies_met(st, head, &polling)) continue;
                if (!head.started) {
                    head.started = true;
                    head.ready_at = now + std::chrono::microseconds(st.stream_delay_us);
                }
                if (head.ready_at > now) {
                    next = std::min(next, head.ready_at);
                    continue;
                }
            }
            Work work = std::move(head);
            queue->pending.pop_front();
            if (!drop) {
                const CUresult rc = work.task(st);
                if (rc != CUDA_SUCCESS && queue->ctx->sticky == CUDA_SUCCESS) queue->ctx->sticky = rc;
            }
            queue->completed = work.seq;
            rotate = (rotate + k + 1) % n;
            ran = true;
        }
        // Queues nobody names any more (destroyed streams, dead contexts) go once drained.
        st.queues.erase(std::remove_if(st.queues.begin(), st.queues.end(),
                                       [](const std::shared_ptr<Queue>& q) {
                                           return q->pending.empty() && q.use_count() == 1;
                                       }),
                        st.queues.end());
        if (ran) {
            st.progress.notify_all();
            continue;
        }
        if (polling) next = std::min(next, now + std::chrono::milliseconds(1));
        if (next == std::chrono::steady_clock::time_point::max())
            st.work.wait(lock);
        else
            wait_until(st.work, lock, next);
    }
}

std::shared_ptr<Queue> make_queue(State& st, CUctx_st* ctx, bool legacy, bool blocking) {
    static std::uint64_t serials = 0;  // the lock is held
    auto queue = std::make_shared<Queue>();
    queue->serial = ++serials;
    queue->ctx = ctx;
    queue->legacy = legacy;
    queue->blocking = blocking;
    st.queues.push_back(queue);
    return queue;
}

// Every queue of a context, the per-thread ones included.
template <typename Visit>
void for_each_queue(State& st, CUctx_st* ctx, Visit visit) {
    for (const auto& queue : st.queues)
        if (queue->ctx == ctx) visit(queue);
}

}  // namespace

std::shared_ptr<Queue> new_queue(State& st, CUctx_st* ctx, bool blocking) {
    return make_queue(st, ctx, false, blocking);
}

CUresult stream_queue(State& st, CUstream s, bool per_thread_default, std::shared_ptr<Queue>* out) {
    CUctx_st* ctx = nullptr;
    if (CUresult rc = check_stream(st, s, &ctx, per_thread_default)) return rc;
    if (!is_default_stream(s)) {
        *out = s->queue;
        return CUDA_SUCCESS;
    }
    const bool per_thread = s == CU_STREAM_PER_THREAD || (s == nullptr && per_thread_default);
    if (!per_thread) {
        if (!ctx->legacy) ctx->legacy = make_queue(st, ctx, true, false);
        *out = ctx->legacy;
        return CUDA_SUCCESS;
    }
    std::shared_ptr<Queue>& mine = ctx->per_thread[std::this_thread::get_id()];
    if (!mine) mine = make_queue(st, ctx, false, true);
    *out = mine;
    return CUDA_SUCCESS;
}

Dependency enqueue(State& st, const std::shared_ptr<Queue>& queue, Task task, std::vector<Dependency> after,
                   SharedEvent* ipc_event, std::uint64_t ipc_target) {
    // The legacy stream's implicit synchronization, both ways.
    if (queue->legacy) {
        for_each_queue(st, queue->ctx, [&](const std::shared_ptr<Queue>& other) {
            if (other->blocking && other->enqueued > other->completed) after.push_back({other, other->enqueued});
        });
    } else if (queue->blocking && queue->ctx->legacy && queue->ctx->legacy->enqueued > queue->ctx->legacy->completed) {
        after.push_back({queue->ctx->legacy, queue->ctx->legacy->enqueued});
    }
    Work work;
    work.seq = ++queue->enqueued;
    work.after = std::move(after);
    work.ipc_event = ipc_event;
    work.ipc_target = ipc_target;
    work.task = std::move(task);
    queue->pending.push_back(std::move(work));
    if (!st.worker_started) {
        st.worker_started = true;
        if (!start_detached([](void*) { worker_main(); }, nullptr)) st.worker_started = false;
    }
    st.work.notify_one();
    return Dependency{queue, queue->enqueued};
}

bool finished(const Dependency& work) { return !work.queue || work.queue->completed >= work.seq; }

bool block_until(State& st, const std::function<bool()>& done, std::chrono::milliseconds poll) {
    std::unique_lock<std::mutex>& lock = Call::current().lock();
    const auto give_up = std::chrono::steady_clock::now() + kLongestWait;
    while (!done()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= give_up) return false;
        if (poll.count() > 0)
            wait_until(st.progress, lock, std::min(give_up, now + poll));
        else
            wait_until(st.progress, lock, give_up);
    }
    return true;
}

CUresult wait_for(State& st, const Dependency& work) {
    if (!block_until(st, [&] { return finished(work); })) return CUDA_ERROR_LAUNCH_TIMEOUT;
    return work.queue ? work.queue->ctx->sticky : CUDA_SUCCESS;
}

CUresult wait_queue(State& st, const std::shared_ptr<Queue>& queue) {
    std::vector<Dependency> all{{queue, queue->enqueued}};
    // Synchronizing the legacy stream waits for the blocking streams too
    // (measured: cuStreamSynchronize(CU_STREAM_LEGACY) waited for a kernel on
    // a CU_STREAM_DEFAULT stream, not for one on a non-blocking stream).
    if (queue->legacy)
        for_each_queue(st, queue->ctx, [&](const std::shared_ptr<Queue>& other) {
            if (other->blocking) all.push_back({other, other->enqueued});
        });
    if (!block_until(st, [&] { return std::all_of(all.begin(), all.end(), finished); }))
        return CUDA_ERROR_LAUNCH_TIMEOUT;
    return queue->ctx->sticky;
}

CUresult wait_context(State& st, CUctx_st* ctx) {
    std::vector<Dependency> all;
    for_each_queue(st, ctx, [&](const std::shared_ptr<Queue>& queue) { all.push_back({queue, queue->enqueued}); });
    if (!block_until(st, [&] { return std::all_of(all.begin(), all.end(), finished); }))
        return CUDA_ERROR_LAUNCH_TIMEOUT;
    return ctx->sticky;
}

bool context_busy(State& st, CUctx_st* ctx) {
    bool busy = false;
    for_each_queue(st, ctx, [&](const std::shared_ptr<Queue>& queue) { busy = busy || !queue->pending.empty(); });
    return busy && ctx->sticky == CUDA_SUCCESS;
}

void drop_context_queues(State& st, CUctx_st* ctx) {
    for_each_queue(st, ctx, [](const std::shared_ptr<Queue>& queue) {
        for (const Work& work : queue->pending) queue->completed = work.seq;
        queue->pending.clear();
    });
    ctx->legacy.reset();
    ctx->per_thread.clear();
    st.progress.notify_all();
}

}  // namespace fake
