// cudyn — UniqueHandle<Held>: the one move-only owner behind every class
// that holds something the driver (or the system) must be given back.
//
// Internal: public only because the owners in the public headers hold one.
#pragma once

#include "cudyn/core/result.hpp"

#include <new>
#include <type_traits>
#include <utility>

namespace cudyn::detail {

// An owner keeps what it holds in one private record, Held, whose members say
// how it is given back:
//
//     struct Held {                        // value-initialised Held{} holds nothing
//         bool empty() const noexcept;     // nothing left to give back
//         Result<void> release();          // gives back what it can (below)
//         void abandon() noexcept;         // optional: bookkeeping when letting go unreleased
//     };
//
// release() leaves in the record exactly what is still held: nothing when it
// succeeds; after a failure whatever the driver refused to take back (all,
// part of a give-back in steps, or none where a step cannot be retried and
// empties the record itself). UniqueHandle never overwrites what a release
// left, so the record may keep settings that are not held (a teardown mode).
//
// The rules every owner then shares:
//  * moving leaves the source as Held{}: empty;
//  * release() reports the first error and keeps what is still held, so a
//    retry gives back the rest; ok() when already empty;
//  * the destructor and move-assignment release silently and let go of what
//    a refusal left (at exit the driver answers CUDA_ERROR_DEINITIALIZED, and
//    a destructor has no one to tell): abandon(), then the record is dropped,
//    members in reverse order of declaration, so a Held lists first what
//    must outlive the rest.
template <typename Record>
class UniqueHandle {
public:
    using Held = Record;

    UniqueHandle() noexcept = default;  // empty
    explicit UniqueHandle(Held held) noexcept : held_(std::move(held)) {}
    // An owner is moved several times on its way out of the call that made it
    // (into its Result, out of it, into the typed owner): the source is
    // emptied in place (its record destroyed, a Held{} made there), not
    // through a temporary record and a move-assignment.
    UniqueHandle(UniqueHandle&& other) noexcept : held_(std::move(other.held_)) { other.make_empty(); }
    UniqueHandle& operator=(UniqueHandle&& other) noexcept {
        if (this != &other) {
            reset();
            held_ = std::move(other.held_);
            other.make_empty();
        }
        return *this;
    }
    UniqueHandle(const UniqueHandle&) = delete;
    UniqueHandle& operator=(const UniqueHandle&) = delete;
    ~UniqueHandle() { reset(); }

    const Held& get() const noexcept { return held_; }
    Held& get() noexcept { return held_; }
    const Held* operator->() const noexcept { return &held_; }
    Held* operator->() noexcept { return &held_; }
    bool empty() const noexcept { return held_.empty(); }

    // Gives the record back now: empty afterwards, or, when refused, holding
    // what the driver kept. ok() when already empty.
    Result<void> release() {
        if (empty()) return ok();
        return held_.release();
    }
    // Releases, and lets go without the driver of whatever that left.
    void reset() noexcept {
        if (release()) return;
        let_go();
    }
    // Lets go of what the record holds without the driver (an owner whose
    // own inline release was refused where no one can be told): empty after.
    void let_go() noexcept {
        abandon(held_, 0);
        // The old record goes with the temporary exchange() returns.
        (void)std::exchange(held_, Held{});
    }

private:
    // Held::abandon() where the record has one.
    template <typename H = Held>
    static auto abandon(H& held, int) noexcept -> decltype(held.abandon()) { held.abandon(); }
    static void abandon(Held&, long) noexcept {}

    // What a move leaves: a value-initialised record, whatever Held's own
    // moves leave behind (plain members keep their values when moved from).
    void make_empty() noexcept {
        held_.~Held();
        ::new (static_cast<void*>(&held_)) Held{};
    }

    Held held_{};
};

}  // namespace cudyn::detail
