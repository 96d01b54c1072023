// cudyn — what the memory ledger shows only to its tests.
#pragma once

#include "cudyn/core/memory_ledger.hpp"

#include <cstddef>

namespace cudyn::detail {

// How many count shards the ledger has made: at most the most threads that
// counted at once (plus none for threads that ended, whose shards are reused).
std::size_t ledger_shard_count() noexcept;

// Who updates a row's live bytes: nobody yet, the one thread the row is
// biased to (owned by) with plain stores, or every thread with locked
// instructions (for good, once a second thread counted there, tracking was
// switched on, or where no row can be biased).
enum class LedgerRowBias { Unowned, Owned, Shared };
LedgerRowBias ledger_row_bias(MemoryKind kind, int device) noexcept;
// Whether rows can be biased to one thread here (a thread pointer to know
// the thread by, and the fence a revoke needs).
bool ledger_biasing_available() noexcept;

}  // namespace cudyn::detail
