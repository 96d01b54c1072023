// cudyn — OwnerContext: the context an owner of driver objects was created
// in, kept for the owner's lifetime and made current while it releases.
//
// Internal: public only because the owners in the public headers hold one
// and their templates use it. Programs hold a PrimaryContext instead.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <cuda.h>

#include <memory>
#include <utility>

namespace cudyn::detail {

struct ContextRetain;  // one cuDevicePrimaryCtxRetain, released with the last owner

// Why every owner of memory, streams, events or imported handles holds one:
// releasing the last reference of a primary context destroys every
// allocation, stream and event in it, and the next allocation can get the
// same address back; an owner that outlived its context would then free
// someone else's memory (the driver answers CUDA_SUCCESS). Holding a retain of
// the context keeps it alive while any owner does, whatever the program did
// with its own PrimaryContext. And a driver release acts on the calling
// thread's current context, so the owner makes its own context current for
// the call (and puts the caller's back), whichever thread destroys it.
class OwnerContext {
public:
    OwnerContext() noexcept = default;  // none (no context was current)
    OwnerContext(const OwnerContext&) = default;
    OwnerContext& operator=(const OwnerContext&) = default;
    // A moved-from OwnerContext is empty.
    OwnerContext(OwnerContext&& other) noexcept
        : context_(std::move(other.context_)),
          handle_(std::exchange(other.handle_, nullptr)),
          device_(std::exchange(other.device_, 0)) {}
    OwnerContext& operator=(OwnerContext&& other) noexcept {
        context_ = std::move(other.context_);
        handle_ = std::exchange(other.handle_, nullptr);
        device_ = std::exchange(other.device_, 0);
        return *this;
    }

    // The calling thread's current context. A primary context is retained;
    // every owner created in it shares one retain (so creating an owner costs
    // a lookup, not a driver call, once one exists). A context cudyn cannot
    // retain (one the program made with cuCtxCreate) is only remembered and
    // bound for releases. Empty, and ok(), when no context is current: the
    // driver call that needs one then says so.
    static Result<OwnerContext> current();
    // A retain of `device`'s primary context, shared like the above: what a
    // PrimaryContext holds, so owners created while one lives share its
    // retain (no driver call) and keep the context after it is released.
    static Result<OwnerContext> retain_primary(CUdevice device);

    // Read on every operation that makes the owner's context current, so kept
    // beside the shared retain rather than read through it (no call, no
    // dereference of the shared record).
    CUcontext handle() const noexcept { return handle_; }
    // The context's device (0 when empty).
    CUdevice device() const noexcept { return device_; }
    bool empty() const noexcept { return context_ == nullptr; }
    // Drops this owner's reference (the retain goes with the last one, silently).
    void reset() noexcept {
        context_.reset();
        handle_ = nullptr;
        device_ = 0;
    }
    // The same, reporting the driver's answer when this was the last
    // reference; a refusal keeps the reference (retry).
    Result<void> release();
    // An owner's release: `release` runs with this context current (and the
    // caller's put back), then this reference is dropped, after the release,
    // because the context must outlive what was released into it. When the
    // context cannot be made current, or the release fails, the error comes
    // back and the reference is kept: the owner still owns, and may retry.
    template <typename Release>
    Result<void> release_into(Release&& release);

private:
    explicit OwnerContext(std::shared_ptr<ContextRetain> shared) noexcept;

    std::shared_ptr<ContextRetain> context_;
    CUcontext handle_ = nullptr;  // context_'s, copied
    CUdevice device_ = 0;
};

// cuDevicePrimaryCtxRelease_v2 (11.0+) where the driver has it, else the 7.0
// form: the table holds both so a CUDA 10 driver still works.
Result<void> release_primary_context(CUdevice device);

// Makes `context` current on the calling thread for a scope, and puts the
// previous one back at its end (nothing is changed when it already is
// current, or when `context` is empty). Whether that worked is status(): an
// explicit operation reports it, a destructor goes on regardless.
//
// Every stream operation and every owner's release opens one, so the common
// case is inline and builds nothing: one cuCtxGetCurrent through the table
// and one comparison when the context is current already. A switch, and any
// failure (with its error text), go out of line.
class ContextScope {
public:
    explicit ContextScope(CUcontext context) noexcept {
        if (context == nullptr) return;
        const DriverTable* table = usable_driver();
        CUresult asked = CUDA_ERROR_NOT_INITIALIZED;
        if (table != nullptr && table->cuCtxGetCurrent_v4000 != nullptr) {
            asked = table->cuCtxGetCurrent_v4000(&previous_);
            if (asked == CUDA_SUCCESS && previous_ == context) return;
        }
        enter(context, table, asked);
    }
    explicit ContextScope(const OwnerContext& context) noexcept : ContextScope(context.handle()) {}
    ~ContextScope() {
        if (switched_) leave();
    }
    ContextScope(const ContextScope&) = delete;
    ContextScope& operator=(const ContextScope&) = delete;

    // ok() when `context` is current now (or was empty); else the driver's
    // answer to cuCtxGetCurrent / cuCtxSetCurrent.
    const Result<void>& status() const noexcept { return status_; }

private:
    // Not current (or the query failed, `asked` its answer): the switch, or the error.
    void enter(CUcontext context, const DriverTable* table, CUresult asked) noexcept;
    void leave() noexcept;  // puts `previous_` back

    CUcontext previous_ = nullptr;
    bool switched_ = false;
    Result<void> status_;
};

template <typename Release>
Result<void> OwnerContext::release_into(Release&& release) {
    Result<void> released = ok();
    {
        const ContextScope scope(handle());
        released = scope.status();
        if (released) released = release();
    }
    if (released) reset();
    return released;
}

}  // namespace cudyn::detail
