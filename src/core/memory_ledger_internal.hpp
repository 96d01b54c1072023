// cudyn — what the memory ledger shows only to its tests.
#pragma once

#include <cstddef>

namespace cudyn::detail {

// How many count shards the ledger has made: at most the most threads that
// counted at once (plus none for threads that ended, whose shards are reused).
std::size_t ledger_shard_count() noexcept;

}  // namespace cudyn::detail
