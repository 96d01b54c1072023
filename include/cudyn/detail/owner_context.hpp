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
    // An owner's release: `release` runs with this context current, the
    // caller's is put back, then `forget` empties the owner's record (this
    // reference with it), after the release, because the context must outlive
    // what was released into it. When the context cannot be made current, or
    // the release fails, the error comes back and nothing is forgotten: the
    // owner still owns, and may retry. A release that succeeded is forgotten
    // even when the caller's context could not be put back; that is reported
    // (ContextScope::finish), and a retry finds the owner empty.
    template <typename Release, typename Forget>
    Result<void> release_into(Release&& release, Forget&& forget);

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
// current, or when `context` is empty). Whether the switch worked is
// status(). The rule every switching call follows: the caller's context is
// back when the call returns, or the call fails saying it is not. So an
// explicit operation ends the scope with finish(), which reports a failed
// put-back; only a destructor leaves it to the scope's end, where a failure
// goes unreported (a destructor has no one to tell).
//
// Every stream operation and every owner's release opens one, so the common
// case is inline and builds nothing: one cuCtxGetCurrent through the table
// and one comparison when the context is current already. A switch, and any
// failure (with its error text), go out of line.
class ContextScope {
public:
    explicit ContextScope(CUcontext context) noexcept : context_(context) {
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

    // Puts the caller's context back now (one attempt; the end of the scope
    // then changes nothing) and returns `result`, the answer of what ran in
    // the scope; or, when the caller's context could not be put back, an
    // error saying so, and that this scope's context stays current on the
    // thread (naming `result`'s own failure too, if it failed).
    template <typename T>
    Result<T> finish(Result<T> result) {
        if (!switched_) return result;
        Result<void> restored = restore();
        if (restored) return result;
        return not_restored(std::move(restored).error(), result ? nullptr : &result.error());
    }

private:
    // Not current (or the query failed, `asked` its answer): the switch, or the error.
    void enter(CUcontext context, const DriverTable* table, CUresult asked) noexcept;
    void leave() noexcept;  // puts `previous_` back, unreported
    Result<void> restore() noexcept;  // puts `previous_` back, reported
    Error not_restored(Error restore_error, const Error* call_error) const;

    CUcontext context_ = nullptr;
    CUcontext previous_ = nullptr;
    bool switched_ = false;
    Result<void> status_;
};

// Runs `call` with `context` current and the caller's put back (nothing
// switched when `context` is empty or already current): the call's answer,
// the switch's refusal (the call does not run), or the put-back's (the call
// ran: ContextScope::finish).
template <typename Call>
auto in_context(CUcontext context, Call&& call) -> decltype(call()) {
    ContextScope scope(context);
    if (!scope.status()) return scope.status().error();
    return scope.finish(call());
}

// A release in `context` (OwnerContext::release_into's rule, for owners
// that release into another context than the one they keep, such as a
// stream's): `release` runs with `context` current, then the caller's is put
// back; `forget` empties the owner's record when the driver took it back,
// even when the put-back failed (a retry must not release it twice), and
// nothing of the record is touched afterwards.
template <typename Release, typename Forget>
Result<void> release_in_context(CUcontext context, Release&& release, Forget&& forget) {
    ContextScope scope(context);
    if (!scope.status()) return scope.status().error();
    Result<void> released = release();
    const bool done = released.has_value();
    released = scope.finish(std::move(released));
    if (done) forget();
    return released;
}

template <typename Release, typename Forget>
Result<void> OwnerContext::release_into(Release&& release, Forget&& forget) {
    return release_in_context(handle(), std::forward<Release>(release), std::forward<Forget>(forget));
}

}  // namespace cudyn::detail
