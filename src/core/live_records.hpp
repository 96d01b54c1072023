// cudyn — a locked table of records by id, oldest first: the ledger's
// tracked allocations and the list of live imports both keep one. Records
// are added and removed where owners open and close, so the table is never
// destroyed: an owner may close at static destruction.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace cudyn::detail {

template <typename Record>
class LiveRecords {
public:
    // The one table of this record type (made once, never destroyed).
    static LiveRecords& instance() {
        static LiveRecords* const table = new LiveRecords;
        return *table;
    }

    // Its id (never 0). Throws what allocation or the lock throws.
    std::uint64_t add(Record record) {
        const std::lock_guard<std::mutex> lock(mutex_);
        const std::uint64_t id = next_id_;
        records_.emplace(id, std::move(record));
        ++next_id_;
        return id;
    }

    void remove(std::uint64_t id) noexcept {
        const std::lock_guard<std::mutex> lock(mutex_);
        records_.erase(id);
    }

    // Every record, oldest first.
    std::vector<Record> list() const {
        const std::lock_guard<std::mutex> lock(mutex_);
        std::vector<Record> alive;
        alive.reserve(records_.size());
        for (const auto& entry : records_) alive.push_back(entry.second);
        return alive;
    }

private:
    LiveRecords() = default;

    mutable std::mutex mutex_;
    std::uint64_t next_id_ = 1;
    std::map<std::uint64_t, Record> records_;
};

}  // namespace cudyn::detail
