// cudyn — OwnerContext: one shared retain per context, and ContextScope.
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <algorithm>
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
                if (auto live = entry.second.lock()) return live;
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
                if (auto live = entry.second.lock()) return live;  // ours is dropped: released at once
        entries_.emplace_back(retain->context, retain);
        return retain;
    }
    // Drops `owner`, giving the retain back and reporting the driver's answer
    // when it is the last reference. Under the lock, so no find() can pick it
    // up meanwhile; a refusal keeps `owner` (and its entry) as they were.
    Result<void> retire(std::shared_ptr<ContextRetain>& owner) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (owner && owner.use_count() == 1) CUDYN_TRY(owner->give_back());
        owner.reset();
        return ok();
    }

private:
    std::mutex mutex_;
    std::vector<std::pair<CUcontext, std::weak_ptr<ContextRetain>>> entries_;
};

RetainRegistry& registry() {
    static RetainRegistry* instance = new RetainRegistry();
    return *instance;
}

}  // namespace

Result<OwnerContext> OwnerContext::current() {
    CUcontext context = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuCtxGetCurrent_v4000, &context));
    OwnerContext owner;
    if (context == nullptr) return owner;
    owner.context_ = registry().find(context);
    if (owner.context_) return owner;
    CUdevice device = 0;
    if (auto known = call_driver(&DriverTable::cuCtxGetDevice_v2000, &device); !known) {
        // The thread still names a primary context whose last reference was
        // released: no usable context is current.
        const CUresult why = known.error().driver_result;
        if (why == CUDA_ERROR_INVALID_CONTEXT || why == CUDA_ERROR_CONTEXT_IS_DESTROYED) return owner;
        return std::move(known).error();
    }
    CUDYN_TRY_ASSIGN(auto primary, retain_primary(device));
    // The current context is not the device's primary one: cudyn can only
    // remember it (the retain just taken goes again with `primary`).
    if (primary.handle() != context) {
        owner.context_ = std::make_shared<ContextRetain>(context, device, false);
        return owner;
    }
    return primary;
}

Result<OwnerContext> OwnerContext::retain_primary(CUdevice device) {
    CUcontext primary = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuDevicePrimaryCtxRetain_v7000, &primary, device));
    OwnerContext owner;
    owner.context_ = registry().publish(std::make_shared<ContextRetain>(primary, device, true));
    return owner;
}

Result<void> OwnerContext::release() { return registry().retire(context_); }

Result<void> release_primary_context(CUdevice device) {
    if (has_entry(&DriverTable::cuDevicePrimaryCtxRelease_v11000))
        return call_driver(&DriverTable::cuDevicePrimaryCtxRelease_v11000, device);
    return call_driver(&DriverTable::cuDevicePrimaryCtxRelease_v7000, device);
}

CUcontext OwnerContext::handle() const noexcept { return context_ ? context_->context : nullptr; }
CUdevice OwnerContext::device() const noexcept { return context_ ? context_->device : 0; }

ContextScope::ContextScope(CUcontext context) noexcept : context_(context) {
    if (context == nullptr) return;
    status_ = call_driver(&DriverTable::cuCtxGetCurrent_v4000, &previous_);
    if (!status_ || previous_ == context) return;
    status_ = call_driver(&DriverTable::cuCtxSetCurrent_v4000, context);
    switched_ = status_.has_value();
}

ContextScope::~ContextScope() {
    if (switched_) (void)call_driver(&DriverTable::cuCtxSetCurrent_v4000, previous_);
}

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
