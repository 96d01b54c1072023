// UniqueHandle<Held>'s contract (unique_handle.hpp), with scripted records
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

// The "driver" the records below give back to: it takes the next `accepts`
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
struct StepHeld {
    std::vector<int> items;
    int setting = 0;  // not held: a release keeps it

    bool empty() const noexcept { return items.empty(); }
    cudyn::Result<void> release() {
        ++ledger().release_calls;
        while (!items.empty()) {
            if (refuse_next()) return refusal();
            ledger().given_back.push_back(items.back());
            items.pop_back();
        }
        return cudyn::ok();
    }
    void abandon() noexcept { ledger().abandoned.insert(ledger().abandoned.end(), items.begin(), items.end()); }
};
using Steps = cudyn::detail::UniqueHandle<StepHeld>;

// A descriptor that is gone once close() was called, whatever it answered.
struct CloseHeld {
    int fd = -1;

    bool empty() const noexcept { return fd < 0; }
    cudyn::Result<void> release() {
        ++ledger().release_calls;
        ledger().given_back.push_back(std::exchange(fd, -1));
        if (refuse_next()) return refusal();
        return cudyn::ok();
    }
};
using Closing = cudyn::detail::UniqueHandle<CloseHeld>;

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
struct PiecesHeld {
    Piece first;
    Piece second;

    bool empty() const noexcept { return first.id == 0 && second.id == 0; }
    cudyn::Result<void> release() { return refusal(); }
};

}  // namespace

static_assert(!std::is_copy_constructible_v<Steps> && !std::is_copy_assignable_v<Steps>);
static_assert(std::is_nothrow_move_constructible_v<Steps> && std::is_nothrow_move_assignable_v<Steps>);

TEST_CASE("UniqueHandle: a move leaves the source empty, a move-assignment releases the target first",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    Steps first(StepHeld{{1, 2}, 7});
    Steps second(std::move(first));
    CHECK(first.empty());
    CHECK(first.get().items.empty());
    CHECK(first.get().setting == 0);  // Held{}, settings included
    CHECK(second.get().items == std::vector<int>{1, 2});
    CHECK(second.get().setting == 7);

    Steps third(StepHeld{{3}, 0});
    third = std::move(second);
    CHECK(ledger().given_back == std::vector<int>{3});
    CHECK(second.empty());
    CHECK(third.get().items == std::vector<int>{1, 2});

    REQUIRE(first.release());  // empty: nothing to give back, the record is not asked
    CHECK(ledger().release_calls == 1);
}

TEST_CASE("UniqueHandle: a refused release keeps what is still held, and a retry gives back the rest",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    Steps owner(StepHeld{{1, 2, 3}, 5});

    // Refused at the first step: everything is kept.
    ledger().accepts = 0;
    auto refused = owner.release();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().driver_result == CUDA_ERROR_DEINITIALIZED);
    CHECK(owner.get().items == std::vector<int>{1, 2, 3});

    // One step goes through, the next is refused: the record keeps exactly the rest.
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
    REQUIRE(owner.release());         // empty now: ok, and the record is not asked again
    CHECK(ledger().release_calls == 3);
    CHECK(ledger().abandoned.empty());
}

TEST_CASE("UniqueHandle: the destructor after a refused release abandons what is left, silently",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    {
        Steps owner(StepHeld{{1, 2, 3}, 0});
        ledger().accepts = 1;  // then the driver takes nothing back any more (as at exit)
    }
    CHECK(ledger().release_calls == 1);  // one attempt, no retry
    CHECK(ledger().given_back == std::vector<int>{3});
    CHECK(ledger().abandoned == std::vector<int>{1, 2});

    // Move-assignment lets go of the target's remains the same way.
    ledger() = Ledger{};
    Steps target(StepHeld{{4}, 0});
    ledger().accepts = 0;
    target = Steps(StepHeld{{5}, 0});
    CHECK(ledger().abandoned == std::vector<int>{4});
    CHECK(target.get().items == std::vector<int>{5});
    ledger().accepts = 1000;
}

TEST_CASE("UniqueHandle: what a refusal left is dropped as a destructor drops it, last member first",
          "[unit][unique-handle]") {
    ledger() = Ledger{};
    {
        cudyn::detail::UniqueHandle<PiecesHeld> owner(PiecesHeld{Piece(1), Piece(2)});
        REQUIRE_FALSE(owner.release());
        CHECK(ledger().dropped.empty());  // still held after a refused release()
    }
    CHECK(ledger().dropped == std::vector<int>{2, 1});
}

TEST_CASE("UniqueHandle: a release that forgets even when it fails is never retried", "[unit][unique-handle]") {
    ledger() = Ledger{};
    {
        Closing descriptor(CloseHeld{5});
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
        Closing descriptor(CloseHeld{6});
        ledger().accepts = 0;
    }
    CHECK(ledger().release_calls == 1);
    CHECK(ledger().given_back == std::vector<int>{6});
}
