// cudyn — UniqueHandle<Traits>: the one move-only owner behind every class
// that holds something the driver (or the system) must be given back: device
// memory, streams, events, opened IPC handles, context retains.
//
// Each owner used to spell out the same four members (move constructor, move
// assignment, destructor, a release that may be retried); they differ only in
// what their state is and how it is given back, which is what Traits says:
//
//     struct Traits {
//         struct State { ... };                        // value-initialised State{} is empty
//         static bool empty(const State&) noexcept;    // nothing to give back
//         static Result<void> release(State&);         // gives it back; on failure leaves it as it was
//         static void abandon(State&) noexcept;        // optional: bookkeeping when letting go unreleased
//     };
//
// The rules every owner then shares:
//  * moving leaves the source empty;
//  * release() reports the driver's answer, and on a refusal keeps the state
//    so that a retry works (nothing is forgotten while the driver still
//    holds it);
//  * the destructor and move-assignment release silently and let go
//    regardless when refused (at exit the driver answers
//    CUDA_ERROR_DEINITIALIZED, and a destructor has no one to tell).
#pragma once

#include "cudyn/result.hpp"

#include <type_traits>
#include <utility>

namespace cudyn::detail {

template <typename Traits>
class UniqueHandle {
public:
    using State = typename Traits::State;

    UniqueHandle() noexcept = default;  // empty
    explicit UniqueHandle(State state) noexcept : state_(std::move(state)) {}
    UniqueHandle(UniqueHandle&& other) noexcept : state_(std::exchange(other.state_, State{})) {}
    UniqueHandle& operator=(UniqueHandle&& other) noexcept {
        if (this != &other) {
            reset();
            state_ = std::exchange(other.state_, State{});
        }
        return *this;
    }
    UniqueHandle(const UniqueHandle&) = delete;
    UniqueHandle& operator=(const UniqueHandle&) = delete;
    ~UniqueHandle() { reset(); }

    const State& get() const noexcept { return state_; }
    State& get() noexcept { return state_; }
    bool empty() const noexcept { return Traits::empty(state_); }

    // Gives the state back now: empty afterwards, or, when refused, unchanged.
    // ok() when already empty.
    Result<void> release() {
        if (empty()) return ok();
        CUDYN_TRY(Traits::release(state_));
        state_ = State{};
        return ok();
    }
    // Releases, and lets go without the driver when that is refused.
    void reset() noexcept {
        if (release()) return;
        abandon(state_);
        state_ = State{};
    }

private:
    template <typename T = Traits>
    static auto abandon(State& state) noexcept -> decltype(T::abandon(state)) {
        T::abandon(state);
    }
    template <typename... Ignored>
    static void abandon(State&, Ignored...) noexcept {}

    State state_{};
};

}  // namespace cudyn::detail
