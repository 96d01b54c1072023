// cudyn — OwnerContext: one shared retain per context, and ContextScope.
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cudyn::detail {

struct ContextRetain {
    CUcontext context = nullptr;
    CUdevice device = 0;
    bool retained = false;  // false: a context cudyn could not retain (or already gave back), only remembered
    // Non-zero while an explicit release decides whether this is the last
    // owner: a thread that picked it up from its cache meanwhile must not
    // keep it. Both sides read it with a read-modify-write, so the two are
    // ordered (no fences: ThreadSanitizer does not model them).
    std::atomic<int> retiring{0};

    ContextRetain(CUcontext c, CUdevice d, bool r) noexcept : context(c), device(d), retained(r) {}
    ContextRetain(const ContextRetain&) = delete;
    ContextRetain& operator=(const ContextRetain&) = delete;
    ~ContextRetain() { (void)give_back(); }

    Result<void> give_back() {
        if (!retained) return ok();
        CUDYN_TRY(release_primary_context(device));
        retained = false;
        return ok();
    }
};

namespace {

// The live retain of each context, so owners created in one context (and the
// program's PrimaryContext objects) share one. Never destroyed: owners may
// die during static destruction.
class RetainRegistry {
public:
    std::shared_ptr<ContextRetain> find(CUcontext context) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& entry : entries_)
            if (entry.first == context)
                if (auto live = shared(entry.second)) return live;
        return nullptr;
    }
    // Records `retain` unless another thread recorded one for the context
    // first; returns the one to share.
    std::shared_ptr<ContextRetain> publish(std::shared_ptr<ContextRetain> retain) {
        std::lock_guard<std::mutex> lock(mutex_);
        entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                      [](const auto& entry) { return entry.second.expired(); }),
                       entries_.end());
        for (auto& entry : entries_)
            if (entry.first == retain->context)
                if (auto live = shared(entry.second)) return live;  // ours is dropped: released at once
        entries_.emplace_back(retain->context, retain);
        return retain;
    }
    // Drops `owner`, giving the retain back and reporting the driver's answer
    // when it is the last reference. Under the lock, so no find() can pick it
    // up meanwhile; a refusal keeps `owner` (and its entry) as they were.
    // A thread's cache (cached_retain) takes a reference without the lock:
    // `retiring` tells it to let go and ask here instead (both sides change
    // or read the flag with a read-modify-write, so one comes after the other:
    // either this sees its reference or it sees the flag).
    Result<void> retire(std::shared_ptr<ContextRetain>& owner) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (owner) {
            owner->retiring.exchange(1, std::memory_order_acq_rel);
            if (owner.use_count() == 1) {
                // Given back, the flag stays: the record is dead to every cache.
                if (auto given = owner->give_back(); !given) {
                    owner->retiring.store(0, std::memory_order_release);
                    return given;
                }
            } else {
                owner->retiring.store(0, std::memory_order_release);
            }
        }
        owner.reset();
        return ok();
    }

private:
    // The entry's retain while it is alive and not given back: a thread's
    // cache may hold a given-back record for a moment (until it reads its
    // flag), which must not be shared from here either.
    static std::shared_ptr<ContextRetain> shared(const std::weak_ptr<ContextRetain>& entry) {
        auto live = entry.lock();
        if (live && live->retiring.load(std::memory_order_acquire) != 0) return nullptr;
        return live;
    }

    std::mutex mutex_;
    std::vector<std::pair<CUcontext, std::weak_ptr<ContextRetain>>> entries_;
};

RetainRegistry& registry() {
    static RetainRegistry* instance = new RetainRegistry();
    return *instance;
}

// The retain this thread last shared, so that creating owners one after
// another in one context takes no lock: a weak reference (the cache must not
// keep a context alive after its last owner), taken again when the thread's
// current context is still that one. A context with no live owner misses.
struct CachedRetain {
    CUcontext context = nullptr;
    std::weak_ptr<ContextRetain> retain;
};
thread_local CachedRetain cached_retain;

std::shared_ptr<ContextRetain> cached(CUcontext context) noexcept {
    CachedRetain& cache = cached_retain;
    if (cache.context != context) return nullptr;
    std::shared_ptr<ContextRetain> live = cache.retain.lock();
    if (!live) return nullptr;
    // An unchanged flag, read as a read-modify-write (retire's rule above).
    if (live->retiring.fetch_add(0, std::memory_order_acq_rel) != 0) return nullptr;  // being released: ask the registry
    return live;
}

void remember(const std::shared_ptr<ContextRetain>& retain) noexcept {
    cached_retain.context = retain->context;
    cached_retain.retain = retain;
}

}  // namespace

Result<OwnerContext> OwnerContext::current() {
    CUcontext context = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &context));
    if (context == nullptr) return OwnerContext();
    if (auto shared = cached(context)) return OwnerContext(std::move(shared));
    if (auto shared = registry().find(context)) {
        remember(shared);
        return OwnerContext(std::move(shared));
    }
    CUdevice device = 0;
    if (auto known = call_driver(&DriverTable::cuCtxGetDevice_v2000, &device); !known) {
        // The thread still names a primary context whose last reference was
        // released: no usable context is current.
        const CUresult why = known.error().driver_result;
        if (why == CUDA_ERROR_INVALID_CONTEXT || why == CUDA_ERROR_CONTEXT_IS_DESTROYED) return OwnerContext();
        return std::move(known).error();
    }
    CUDYN_TRY_ASSIGN(auto primary, retain_primary(device));
    // The current context is not the device's primary one: cudyn can only
    // remember it (the retain just taken goes again with `primary`).
    if (primary.handle() != context) return OwnerContext(std::make_shared<ContextRetain>(context, device, false));
    return primary;
}

Result<OwnerContext> OwnerContext::retain_primary(CUdevice device) {
    CUcontext primary = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuDevicePrimaryCtxRetain_v7000, &primary, device));
    auto shared = registry().publish(std::make_shared<ContextRetain>(primary, device, true));
    remember(shared);
    return OwnerContext(std::move(shared));
}

Result<void> OwnerContext::release() {
    CUDYN_TRY(registry().retire(context_));
    handle_ = nullptr;
    device_ = 0;
    return ok();
}

Result<void> release_primary_context(CUdevice device) {
    if (has_entry(&DriverTable::cuDevicePrimaryCtxRelease_v11000))
        return call_driver(&DriverTable::cuDevicePrimaryCtxRelease_v11000, device);
    return call_driver(&DriverTable::cuDevicePrimaryCtxRelease_v7000, device);
}

OwnerContext::OwnerContext(std::shared_ptr<ContextRetain> shared) noexcept
    : context_(std::move(shared)),
      handle_(context_ ? context_->context : nullptr),
      device_(context_ ? context_->device : 0) {}

void ContextScope::enter(CUcontext context, const DriverTable* table, CUresult asked) noexcept {
    if (table == nullptr || table->cuCtxGetCurrent_v4000 == nullptr) {
        status_ = entry_unavailable(table, &DriverTable::cuCtxGetCurrent_v4000);
        return;
    }
    if (asked != CUDA_SUCCESS) {
        status_ = call_failed(asked, &DriverTable::cuCtxGetCurrent_v4000);
        return;
    }
    status_ = call_driver(&DriverTable::cuCtxSetCurrent_v4000, context);
    switched_ = status_.has_value();
}

void ContextScope::leave() noexcept { (void)call_driver(&DriverTable::cuCtxSetCurrent_v4000, previous_); }

Result<void> ContextScope::restore() noexcept {
    switched_ = false;
    return call_driver(&DriverTable::cuCtxSetCurrent_v4000, previous_);
}

Error ContextScope::not_restored(Error restore_error, const Error* call_error) const {
    char contexts[160];
    if (previous_ != nullptr)
        std::snprintf(contexts, sizeof contexts, "context %p stays current on this thread instead of the caller's %p",
                      static_cast<void*>(context_), static_cast<void*>(previous_));
    else
        std::snprintf(contexts, sizeof contexts, "context %p stays current on this thread, where the caller had none",
                      static_cast<void*>(context_));
    restore_error.message = std::string("the caller's context could not be put back: ") + contexts +
                            (call_error != nullptr ? "; the call itself had failed: " + call_error->describe()
                                                   : std::string("; the call itself succeeded"));
    return restore_error;
}

}  // namespace cudyn::detail
