// The memory ledger's counts across threads, with no driver: tickets opened
// and closed directly. Counts live in per-thread shards summed by snapshot(),
// so these check what sharding could break: a ticket closed on another thread
// than it was opened on, shards handed back by ended threads and reused, and
// snapshots taken while other threads count. A Meson test of its own
// ([ledger-threads]), counted on an otherwise quiet process.
#include "support/catch.hpp"

#include "core/memory_ledger_internal.hpp"
#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/detail/ledger_ticket.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>
#endif

using cudyn::LedgerEntry;
using cudyn::MemoryKind;
using cudyn::detail::ledger_open;
using cudyn::detail::LedgerTicket;

namespace {

LedgerEntry row(MemoryKind kind, int device) { return cudyn::ledger::snapshot().of(kind, device); }

// Joins its threads however the test case ends (a failed REQUIRE throws).
struct Joined {
    std::vector<std::thread> threads;
    ~Joined() {
        for (std::thread& thread : threads) {
            if (thread.joinable()) thread.join();
        }
    }
};

}  // namespace

TEST_CASE("Ledger threads: opened on one thread, closed on another", "[ledger-threads]") {
    REQUIRE(cudyn::ledger::enabled());
    const LedgerEntry before = row(MemoryKind::IpcOpened, 3);
    std::vector<LedgerTicket> tickets;
    std::uint64_t bytes = 0;
    std::thread opener([&] {
        for (std::size_t i = 1; i <= 100; ++i) {
            tickets.push_back(ledger_open(MemoryKind::IpcOpened, 3, i * 64, i));
            bytes += i * 64;
        }
    });
    opener.join();
    // The opening thread has ended (its shard handed back): its counts stay.
    const LedgerEntry opened = row(MemoryKind::IpcOpened, 3);
    CHECK(opened.live_count == before.live_count + 100);
    CHECK(opened.live_bytes == before.live_bytes + bytes);
    CHECK(opened.total_allocations == before.total_allocations + 100);
    CHECK(opened.peak_bytes >= opened.live_bytes);

    std::thread closer([&] {
        for (LedgerTicket& ticket : tickets) ticket.close();
    });
    closer.join();
    const LedgerEntry closed = row(MemoryKind::IpcOpened, 3);
    CHECK(closed.live_count == before.live_count);
    CHECK(closed.live_bytes == before.live_bytes);
    CHECK(closed.total_allocations == before.total_allocations + 100);
    CHECK(closed.peak_bytes == opened.peak_bytes);
}

TEST_CASE("Ledger threads: ended threads' shards are reused, counts stay exact", "[ledger-threads]") {
    REQUIRE(cudyn::ledger::enabled());
    const LedgerEntry before = row(MemoryKind::Pinned, 5);
    const std::size_t shards_before = cudyn::detail::ledger_shard_count();
    std::vector<LedgerTicket> kept;
    for (int i = 0; i < 1000; ++i) {
        std::thread worker([&kept] {
            LedgerTicket a = ledger_open(MemoryKind::Pinned, 5, 10, 0);
            LedgerTicket b = ledger_open(MemoryKind::Pinned, 5, 20, 0);
            kept.push_back(ledger_open(MemoryKind::Pinned, 5, 30, 0));  // outlives the thread
            a.close();
        });  // b closes as the lambda returns
        worker.join();
    }
    // One thread at a time: one shard taken and handed back over and over
    // (plus this thread's, where it had none yet).
    CHECK(cudyn::detail::ledger_shard_count() <= shards_before + 1);
    const LedgerEntry during = row(MemoryKind::Pinned, 5);
    CHECK(during.live_count == before.live_count + 1000);
    CHECK(during.live_bytes == before.live_bytes + 1000 * 30);
    CHECK(during.total_allocations == before.total_allocations + 3000);
    kept.clear();
    const LedgerEntry after = row(MemoryKind::Pinned, 5);
    CHECK(after.live_count == before.live_count);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(after.total_allocations == before.total_allocations + 3000);
}

TEST_CASE("Ledger threads: a ticket closed after its thread handed its shard back", "[ledger-threads]") {
    REQUIRE(cudyn::ledger::enabled());
    const LedgerEntry before = row(MemoryKind::Registered, 4);
    std::thread worker([] {
        // Made before the thread's first count, so destroyed after the shard
        // went back at thread exit: that close counts in the shared shard.
        thread_local LedgerTicket late;
        late = ledger_open(MemoryKind::Registered, 4, 512, 0);
        LedgerTicket early = ledger_open(MemoryKind::Registered, 4, 256, 0);
    });
    worker.join();
    const LedgerEntry after = row(MemoryKind::Registered, 4);
    CHECK(after.live_count == before.live_count);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(after.total_allocations == before.total_allocations + 2);
}

TEST_CASE("Ledger threads: snapshots while threads count, tickets passed between them", "[ledger-threads]") {
    REQUIRE(cudyn::ledger::enabled());
    constexpr int threads = 4;
    constexpr int pairs = 20000;
    const LedgerEntry before = row(MemoryKind::Managed, 2);
    std::mutex mutex;
    constexpr std::size_t backlog = 8;
    std::deque<LedgerTicket> passed;  // a thread closes the oldest ticket here, most often another's
    std::atomic<int> running{threads};
    Joined workers;
    for (int t = 0; t < threads; ++t) {
        workers.threads.emplace_back([&] {
            for (int i = 0; i < pairs; ++i) {
                LedgerTicket mine = ledger_open(MemoryKind::Managed, 2, 4096, 0);
                LedgerTicket theirs;
                {
                    const std::lock_guard<std::mutex> lock(mutex);
                    passed.push_back(std::move(mine));
                    if (passed.size() > backlog) {
                        theirs = std::move(passed.front());
                        passed.pop_front();
                    }
                }
                theirs.close();
            }
            running.fetch_sub(1);
        });
    }
    int snapshots = 0;
    while (running.load() > 0 || snapshots == 0) {
        const LedgerEntry now = row(MemoryKind::Managed, 2);
        // A close is read with its open, so the count never wraps below zero.
        // (Opens made while the snapshot sums may show: no upper bound on
        // the count; live bytes are one value, at most what the backlog and
        // one ticket per thread hold.)
        REQUIRE(now.live_count >= before.live_count);
        REQUIRE(now.live_count - before.live_count <= now.total_allocations - before.total_allocations);
        REQUIRE(now.live_bytes - before.live_bytes <= (backlog + threads) * 4096);
        ++snapshots;
    }
    for (std::thread& worker : workers.threads) worker.join();
    const LedgerEntry ended = row(MemoryKind::Managed, 2);
    CHECK(passed.size() == backlog);
    CHECK(ended.live_count == before.live_count + backlog);
    CHECK(ended.live_bytes == before.live_bytes + backlog * 4096);
    passed.clear();
    const LedgerEntry after = row(MemoryKind::Managed, 2);
    CHECK(after.live_count == before.live_count);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(after.total_allocations == before.total_allocations + threads * pairs);
    CHECK(after.peak_bytes >= before.live_bytes + backlog * 4096);
    CHECK(after.peak_bytes <= std::max(before.peak_bytes, before.live_bytes + (backlog + threads) * 4096));
    // The workers' shards plus this thread's, at most: ended threads' are reused.
    CHECK(cudyn::detail::ledger_shard_count() <= static_cast<std::size_t>(threads) + 1);
}

TEST_CASE("Ledger threads: a row's owner counts without locked adds until a second thread revokes it",
          "[ledger-threads]") {
    using cudyn::detail::LedgerRowBias;
    using cudyn::detail::ledger_row_bias;
    REQUIRE(cudyn::ledger::enabled());
    const bool biased = cudyn::detail::ledger_biasing_available();
    constexpr MemoryKind kind = MemoryKind::AllocationImported;
    // One row per round, each revoked while its owner counts as fast as it
    // can: an update lost between the owner's plain load and store and the
    // revoker's locked add would leave the live bytes off.
    constexpr int first_device = 16;
    constexpr int rounds = 24;
    for (int device = first_device; device < first_device + rounds; ++device) {
        const LedgerEntry before = row(kind, device);
        REQUIRE(ledger_row_bias(kind, device) == LedgerRowBias::Unowned);
        ledger_open(kind, device, 1, 0);  // opened and closed at once: the row is this thread's
        CHECK(ledger_row_bias(kind, device) == (biased ? LedgerRowBias::Owned : LedgerRowBias::Shared));

        std::atomic<int> owner_pairs{0};
        std::atomic<bool> stop{false};
        std::uint64_t other_pairs = 0;
        Joined other;
        other.threads.emplace_back([&] {
            while (owner_pairs.load() < 2000) std::this_thread::yield();
            for (; other_pairs < 20000; ++other_pairs) {
                LedgerTicket ticket = ledger_open(kind, device, 3, 0);
            }
            stop.store(true);
        });
        LedgerTicket held = ledger_open(kind, device, 1000, 0);  // live across the revoke
        int pairs = 0;
        while (!stop.load() || pairs < 4000) {
            LedgerTicket ticket = ledger_open(kind, device, 5 + pairs % 7, 0);
            owner_pairs.store(++pairs);
        }
        other.threads.front().join();
        CHECK(ledger_row_bias(kind, device) == LedgerRowBias::Shared);
        const LedgerEntry during = row(kind, device);
        CHECK(during.live_bytes == before.live_bytes + 1000);
        CHECK(during.live_count == before.live_count + 1);
        CHECK(during.total_allocations == before.total_allocations + 2 + pairs + other_pairs);
        CHECK(during.peak_bytes >= 1000 + 11);
        CHECK(during.peak_bytes <= 1000 + 11 + 3);
        held.close();
        CHECK(row(kind, device).live_bytes == before.live_bytes);
    }
}

TEST_CASE("Ledger threads: the owner's peak is the highest total, also after the row is shared",
          "[ledger-threads]") {
    REQUIRE(cudyn::ledger::enabled());
    constexpr MemoryKind kind = MemoryKind::AllocationImported;
    constexpr int device = 50;
    std::vector<LedgerTicket> tickets;
    for (std::size_t i = 1; i <= 10; ++i) tickets.push_back(ledger_open(kind, device, i * 100, 0));
    tickets.erase(tickets.begin() + 5, tickets.end());  // 100 + ... + 500 live, 5500 at the top
    CHECK(row(kind, device).peak_bytes == 5500);
    CHECK(row(kind, device).live_bytes == 1500);
    std::thread([&] {
        LedgerTicket big = ledger_open(kind, device, 4500, 0);  // revokes: 6000 live
    }).join();
    CHECK(cudyn::detail::ledger_row_bias(kind, device) == cudyn::detail::LedgerRowBias::Shared);
    CHECK(row(kind, device).peak_bytes == 6000);
    tickets.clear();
    CHECK(row(kind, device).live_bytes == 0);
    cudyn::ledger::reset_peaks();
    CHECK(row(kind, device).peak_bytes == 0);
}

TEST_CASE("Ledger threads: tracking switched on shares the rows a thread owned, and lists their opens",
          "[ledger-threads]") {
    using cudyn::detail::LedgerRowBias;
    using cudyn::detail::ledger_row_bias;
    REQUIRE(cudyn::ledger::enabled());
    constexpr MemoryKind kind = MemoryKind::AllocationImported;
    constexpr int device = 51;
    LedgerTicket before_tracking = ledger_open(kind, device, 64, 0x1000);
    CHECK(ledger_row_bias(kind, device) ==
          (cudyn::detail::ledger_biasing_available() ? LedgerRowBias::Owned : LedgerRowBias::Shared));
    cudyn::ledger::track_allocations(true);  // the owner's path takes no record: it must not serve these
    CHECK(ledger_row_bias(kind, device) == LedgerRowBias::Shared);
    LedgerTicket tracked = ledger_open(kind, device, 128, 0x2000);
    cudyn::ledger::track_allocations(false);
    const auto listed = [&](std::uintptr_t address) {
        for (const cudyn::LiveAllocation& allocation : cudyn::ledger::live_allocations()) {
            if (allocation.kind == kind && allocation.device == device && allocation.address == address) return true;
        }
        return false;
    };
    CHECK(listed(0x2000));
    CHECK_FALSE(listed(0x1000));  // opened before tracking: counted, not listed
    const LedgerEntry both = row(kind, device);
    CHECK(both.live_bytes == 192);
    CHECK(both.live_count == 2);
    tracked.close();
    CHECK_FALSE(listed(0x2000));
    before_tracking.close();
    CHECK(row(kind, device).live_bytes == 0);
    CHECK(row(kind, device).total_allocations == 2);
}

#if defined(__linux__)
TEST_CASE("Ledger threads: a forked child counts on a row another thread of its parent owned", "[ledger-threads]") {
    REQUIRE(cudyn::ledger::enabled());
    constexpr MemoryKind kind = MemoryKind::AllocationImported;
    constexpr int device = 52;
    // A thread that owns the row and keeps counting there until the fork is
    // done, so that it may be inside its window when the process forks.
    std::atomic<bool> forked{false};
    std::atomic<int> pairs{0};
    Joined owner;
    owner.threads.emplace_back([&] {
        while (!forked.load()) {
            LedgerTicket ticket = ledger_open(kind, device, 8, 0);
            pairs.fetch_add(1);
        }
    });
    struct StopOwner {  // before the owner is joined, however the case ends
        std::atomic<bool>& stop;
        ~StopOwner() { stop.store(true); }
    } stop_owner{forked};
    while (pairs.load() < 1000) std::this_thread::yield();
    // Several forks: each may catch the owner inside its window.
    for (int round = 0; round < 20; ++round) {
        const pid_t child = fork();
        if (child == 0) {
            // Only this thread exists here: the row's owner is gone, its
            // window (open or not) cleared by the ledger's fork handler.
            const LedgerEntry before = row(kind, device);
            {
                LedgerTicket mine = ledger_open(kind, device, 100, 0);  // revokes the owner's bias
                if (row(kind, device).live_bytes != before.live_bytes + 100) _exit(2);
            }
            _exit(row(kind, device).live_bytes == before.live_bytes &&
                          cudyn::detail::ledger_row_bias(kind, device) == cudyn::detail::LedgerRowBias::Shared
                      ? 0
                      : 3);
        }
        REQUIRE(child > 0);
        int status = 0;
        REQUIRE(waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    forked.store(true);
    owner.threads.front().join();
}
#endif
