// cudyn — UniqueHandle<Traits>: the one move-only owner behind every class
// that holds something the driver (or the system) must be given back: device
// memory, streams, events, opened IPC handles, context retains, VMM mappings
// and growable buffers, file descriptors and listening sockets.
//
// Each owner used to spell out the same four members (move constructor, move
// assignment, destructor, a release that may be retried); they differ only in
// what their state is and how it is given back, which is what Traits says:
//
//     struct Traits {
//         struct State { ... };                        // value-initialised State{} holds nothing
//         static bool empty(const State&) noexcept;    // nothing left to give back
//         static Result<void> release(State&);         // gives back what it can (below)
//         static void abandon(State&) noexcept;        // optional: bookkeeping when letting go unreleased
//     };
//
// Traits::release leaves in the state exactly what is still held: nothing
// (Traits::empty) when it succeeds, and after a failure whatever the driver
// refused to take back, which may be all of it, part of it (a give-back in
// steps that stopped half-way) or none of it (a step that cannot be retried,
// such as close(), empties the state itself before it reports the error).
// UniqueHandle never overwrites what the release left, so the state may also
// keep settings that are not held (a teardown mode, a name) after a release.
//
// The rules every owner then shares:
//  * moving leaves the source as State{}: empty;
//  * release() reports the first error and keeps what the state still holds,
//    so that a retry gives back the rest (nothing is forgotten while the
//    driver still holds it); ok() when already empty;
//  * the destructor and move-assignment release silently and let go of what
//    a refusal left (at exit the driver answers CUDA_ERROR_DEINITIALIZED, and
//    a destructor has no one to tell): Traits::abandon, then the state is
//    dropped as its own destructor drops it, members in reverse order of
//    declaration, so a State lists first what must outlive the rest.
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

    // Gives the state back now: empty afterwards, or, when refused, holding
    // what the driver kept. ok() when already empty.
    Result<void> release() {
        if (empty()) return ok();
        return Traits::release(state_);
    }
    // Releases, and lets go without the driver of whatever that left.
    void reset() noexcept {
        if (release()) return;
        abandon(state_);
        // The old state goes with the temporary exchange() returns.
        (void)std::exchange(state_, State{});
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
