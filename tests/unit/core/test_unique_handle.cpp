// UniqueHandle<Traits>'s contract (unique_handle.hpp), with scripted traits
// and no driver: moves, releases in steps that a refusal stops half-way, a
// release that forgets even when it fails (close), and what the destructor
// does with what a refusal left.
#include "support/catch.hpp"

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// The "driver" the traits below give back to: it takes the next `accepts`
// give-backs and refuses every one after, and records what it took, what was
// abandoned and what was dropped.
struct Ledger {
    int accepts = 1000;
    int release_calls = 0;
    std::vector<int> given_back;
    std::vector<int> abandoned;
    std::vector<int> dropped;
};

Ledger& ledger() {
    static Ledger instance;
    return instance;
}

cudyn::Error refusal() { return cudyn::Error::from_driver(CUDA_ERROR_DEINITIALIZED, "cuGiveBack"); }

bool refuse_next() {
    if (ledger().accepts == 0) return true;
    --ledger().accepts;
    return false;
}

// Items given back one at a time, last first (as GrowableBuffer's chunks):
// a refusal stops the release with the rest still held.
struct StepTraits {
    struct State {
        std::vector<int> items;
        int setting = 0;  // not held: a release keeps it
    };
    static bool empty(const State& state) noexcept { return state.items.empty(); }
    static cudyn::Result<void> release(State& state) {
        ++ledger().release_calls;
        while (!state.items.empty()) {
            if (refuse_next()) return refusal();
            ledger().given_back.push_back(state.items.back());
            state.items.pop_back();
        }
        return cudyn::ok();
    }
    static void abandon(State& state) noexcept {
        ledger().abandoned.insert(ledger().abandoned.end(), state.items.begin(), state.items.end());
    }
};
using Steps = cudyn::detail::UniqueHandle<StepTraits>;

// A descriptor that is gone once close() was called, whatever it answered.
struct CloseTraits {
    struct State {
        int fd = -1;
    };
    static bool empty(const State& state) noexcept { return state.fd < 0; }
    static cudyn::Result<void> release(State& state) {
        ++ledger().release_calls;
        ledger().given_back.push_back(std::exchange(state.fd, -1));
        if (refuse_next()) return refusal();
        return cudyn::ok();
    }
};
using Closing = cudyn::detail::UniqueHandle<CloseTraits>;

// Records its id in the ledger when it is destroyed holding one.
struct Piece {
    int id = 0;
    Piece() noexcept = default;
    explicit Piece(int value) noexcept : id(value) {}
    Piece(Piece&& other) noexcept : id(std::exchange(other.id, 0)) {}
    Piece& operator=(Piece&& other) noexcept {
        id = std::exchange(other.id, 0);
        return *this;
    }
    ~Piece() {
        if (id != 0) ledger().dropped.push_back(id);
    }
};

// Two pieces the driver never takes back: every release is refused.
struct PiecesTraits {
    struct State {
        Piece first;
        Piece second;
    };
    static bool empty(const State& state) noexcept { return state.first.id == 0 && state.second.id == 0; }
    static cudyn::Result<void> release(State&) { return refusal(); }
};

}  // namespace

static_assert(!std::is_copy_constructible_v<Steps> && !std::is_copy_assignable_v<Steps>);
static_assert(std::is_nothrow_move_constructible_v<Steps> && std::is_nothrow_move_assignable_v<Steps>);

TEST_CASE("UniqueHandle: a move leaves the source empty, a move-assignment releases the target first",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    Steps first(StepTraits::State{{1, 2}, 7});
    Steps second(std::move(first));
    CHECK(first.empty());
    CHECK(first.get().items.empty());
    CHECK(first.get().setting == 0);  // State{}, settings included
    CHECK(second.get().items == std::vector<int>{1, 2});
    CHECK(second.get().setting == 7);

    Steps third(StepTraits::State{{3}, 0});
    third = std::move(second);
    CHECK(ledger().given_back == std::vector<int>{3});
    CHECK(second.empty());
    CHECK(third.get().items == std::vector<int>{1, 2});

    REQUIRE(first.release());  // empty: nothing to give back, the traits are not asked
    CHECK(ledger().release_calls == 1);
}

TEST_CASE("UniqueHandle: a refused release keeps what is still held, and a retry gives back the rest",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    Steps owner(StepTraits::State{{1, 2, 3}, 5});

    // Refused at the first step: everything is kept.
    ledger().accepts = 0;
    auto refused = owner.release();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().driver_result == CUDA_ERROR_DEINITIALIZED);
    CHECK(owner.get().items == std::vector<int>{1, 2, 3});

    // One step goes through, the next is refused: the state keeps exactly the rest.
    ledger().accepts = 1;
    REQUIRE_FALSE(owner.release());
    CHECK_FALSE(owner.empty());
    CHECK(owner.get().items == std::vector<int>{1, 2});
    CHECK(ledger().given_back == std::vector<int>{3});

    // The retry gives back only what was left.
    ledger().accepts = 1000;
    REQUIRE(owner.release());
    CHECK(owner.empty());
    CHECK(ledger().given_back == std::vector<int>{3, 2, 1});
    CHECK(owner.get().setting == 5);  // a release leaves what is not held where it was
    REQUIRE(owner.release());         // empty now: ok, and the traits are not asked again
    CHECK(ledger().release_calls == 3);
    CHECK(ledger().abandoned.empty());
}

TEST_CASE("UniqueHandle: the destructor after a refused release abandons what is left, silently",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    {
        Steps owner(StepTraits::State{{1, 2, 3}, 0});
        ledger().accepts = 1;  // then the driver takes nothing back any more (as at exit)
    }
    CHECK(ledger().release_calls == 1);  // one attempt, no retry
    CHECK(ledger().given_back == std::vector<int>{3});
    CHECK(ledger().abandoned == std::vector<int>{1, 2});

    // Move-assignment lets go of the target's remains the same way.
    ledger() = Ledger{};
    Steps target(StepTraits::State{{4}, 0});
    ledger().accepts = 0;
    target = Steps(StepTraits::State{{5}, 0});
    CHECK(ledger().abandoned == std::vector<int>{4});
    CHECK(target.get().items == std::vector<int>{5});
    ledger().accepts = 1000;
}

TEST_CASE("UniqueHandle: what a refusal left is dropped as a destructor drops it, last member first",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    {
        cudyn::detail::UniqueHandle<PiecesTraits> owner(PiecesTraits::State{Piece(1), Piece(2)});
        REQUIRE_FALSE(owner.release());
        CHECK(ledger().dropped.empty());  // still held after a refused release()
    }
    CHECK(ledger().dropped == std::vector<int>{2, 1});
}

TEST_CASE("UniqueHandle: a release that forgets even when it fails is never retried", "[unit][unique-handle]") {
    ledger() = Ledger{};
    {
        Closing descriptor(CloseTraits::State{5});
        ledger().accepts = 0;
        auto closed = descriptor.release();
        REQUIRE_FALSE(closed);
        CHECK(descriptor.empty());  // gone although close() reported an error
        REQUIRE(descriptor.release());
        CHECK(ledger().release_calls == 1);
    }
    CHECK(ledger().release_calls == 1);  // the destructor had nothing left to close
    CHECK(ledger().given_back == std::vector<int>{5});

    ledger() = Ledger{};
    {
        Closing descriptor(CloseTraits::State{6});
        ledger().accepts = 0;
    }
    CHECK(ledger().release_calls == 1);
    CHECK(ledger().given_back == std::vector<int>{6});
}
