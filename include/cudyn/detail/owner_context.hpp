// cudyn — OwnerContext: the context an owner of driver objects was created
// in, kept for the owner's lifetime and made current while it releases.
//
// Internal: public only because the owners in the public headers hold one
// and their templates use it. Programs hold a PrimaryContext instead.
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <memory>

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

    CUcontext handle() const noexcept;
    // The context's device (0 when empty).
    CUdevice device() const noexcept;
    bool empty() const noexcept { return context_ == nullptr; }
    // Drops this owner's reference (the retain goes with the last one, silently).
    void reset() noexcept { context_.reset(); }
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
    std::shared_ptr<ContextRetain> context_;
};

// cuDevicePrimaryCtxRelease_v2 (11.0+) where the driver has it, else the 7.0
// form: the table holds both so a CUDA 10 driver still works.
Result<void> release_primary_context(CUdevice device);

// Makes `context` current on the calling thread for a scope, and puts the
// previous one back at its end (nothing is changed when it already is
// current, or when `context` is empty). Whether that worked is status(): an
// explicit operation reports it, a destructor goes on regardless.
class ContextScope {
public:
    explicit ContextScope(CUcontext context) noexcept;
    explicit ContextScope(const OwnerContext& context) noexcept : ContextScope(context.handle()) {}
    ~ContextScope();
    ContextScope(const ContextScope&) = delete;
    ContextScope& operator=(const ContextScope&) = delete;

    // ok() when `context` is current now (or was empty); else the driver's
    // answer to cuCtxGetCurrent / cuCtxSetCurrent.
    const Result<void>& status() const noexcept { return status_; }

private:
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
