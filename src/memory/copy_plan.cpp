// cudyn — CopyPlan: one cuMemcpyBatchAsync (13.0 or 12.8 ABI) where the
// driver and the stream allow it, one cuMemcpyAsync per copy otherwise.
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "device/internal.hpp"
#include "memory/internal.hpp"

#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kAdd{"CopyPlan::add"};
constexpr detail::Operation kExecute{"CopyPlan::execute"};
constexpr detail::Operation kExecuteVia{"CopyPlan::execute_via"};

// "copy N (counting from 0)": which copy of the plan an add refused.
std::string copy_text(std::size_t copy) { return "copy " + std::to_string(copy) + " (counting from 0): "; }

std::string range_text(CUdeviceptr address, std::size_t bytes) {
    return std::to_string(bytes) + " bytes at " + detail::hex(address);
}

// The last byte of an interval map's entry (first -> last, or first -> {last, ...}).
CUdeviceptr last_of(CUdeviceptr last) { return last; }
template <typename Entry>
CUdeviceptr last_of(const Entry& entry) {
    return entry.end;
}

// In a map of disjoint intervals keyed by their first byte: the entry that
// overlaps [first, last], or end(). Only the last interval starting at or
// before `last` can: it reaches furthest of those.
template <typename Map>
typename Map::const_iterator overlapping(const Map& map, CUdeviceptr first, CUdeviceptr last) {
    auto it = map.upper_bound(last);
    if (it == map.begin()) return map.end();
    --it;
    return last_of(it->second) >= first ? it : map.end();
}

CUmemcpySrcAccessOrder driver_order(SourceAccessOrder order) noexcept {
    switch (order) {
        case SourceAccessOrder::DuringCall: return CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
        case SourceAccessOrder::Any: return CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
        case SourceAccessOrder::Stream: break;
    }
    return CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
}

}  // namespace

const char* to_string(CopyPlan::Path path) noexcept {
    switch (path) {
        case CopyPlan::Path::Batch13000: return "batch (13.0 ABI)";
        case CopyPlan::Path::Batch12080: return "batch (12.8 ABI)";
        case CopyPlan::Path::PerCopy: break;
    }
    return "per copy";
}

// ---- recording ---------------------------------------------------------------------------------

// Every copy is checked here, when it is added, rather than left to the
// driver: a batch whose destination was an address the driver did not know
// crashed the process (driver 580) instead of being refused. A registered
// range's separate device alias is not known to be its host range: overlap
// is judged by address alone.

Result<void> CopyPlan::add_copy(Side destination, Side source, std::size_t element_size) {
    const std::string copy = copy_text(sizes_.size());
    const auto check = [&copy](const Side& side, const char* role) -> Result<void> {
        const std::string name = copy + role + (side.host ? " host span" : " device span");
        if (side.address == 0) return kAdd.invalid(name + (side.host ? " has a null data pointer" : " is empty"));
        if (side.count == 0) return kAdd.invalid(name + " is empty");
        return ok();
    };
    CUDYN_TRY(check(destination, "the destination"));
    CUDYN_TRY(check(source, "the source"));
    if (destination.count != source.count)
        return kAdd.invalid(copy + "the destination has " + std::to_string(destination.count) +
                            " elements and the source " + std::to_string(source.count) +
                            ": a copy moves whole spans of one size (take a subspan of the larger)");
    CUDYN_TRY_ASSIGN(const std::size_t bytes, detail::byte_size(source.count, element_size, kAdd.name()));
    return add_range(destination.address, source.address, bytes);
}

Result<void> CopyPlan::add_bytes(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes) {
    const std::string copy = copy_text(sizes_.size());
    if (destination == 0) return kAdd.invalid(copy + "the destination is address 0");
    if (source == 0) return kAdd.invalid(copy + "the source is address 0");
    if (bytes == 0) return kAdd.invalid(copy + "0 bytes (the driver refuses empty copies)");
    return add_range(destination, source, bytes);
}

Result<void> CopyPlan::add_range(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes) {
    const std::size_t index = sizes_.size();
    const std::string where = std::string(kAdd.name()) + ": copy " + std::to_string(index);
    CUDYN_TRY(detail::check_address_range(destination, bytes, (where + ": the destination").c_str()));
    CUDYN_TRY(detail::check_address_range(source, bytes, (where + ": the source").c_str()));
    const std::string copy = copy_text(index);
    // Inclusive ends: a range may end at the very top of the address space.
    const CUdeviceptr destination_last = destination + (bytes - 1);
    const CUdeviceptr source_last = source + (bytes - 1);
    if (destination <= source_last && source <= destination_last)
        return kAdd.invalid(copy + "the source (" + range_text(source, bytes) + ") overlaps its destination (" +
                            range_text(destination, bytes) + "): copies are memcpy, not memmove");
    // The copies of a batch run in no order: none may write what another reads or writes.
    constexpr const char* kNoOrder = " (the copies of a plan run in no particular order)";
    if (auto other = overlapping(written_, destination, destination_last); other != written_.end())
        return kAdd.invalid(copy + "the destination (" + range_text(destination, bytes) +
                            ") overlaps the destination of copy " + std::to_string(other->second.copy) + kNoOrder);
    if (overlapping(read_, destination, destination_last) != read_.end())
        return kAdd.invalid(copy + "the destination (" + range_text(destination, bytes) +
                            ") overlaps the source of an earlier copy" + kNoOrder);
    if (auto other = overlapping(written_, source, source_last); other != written_.end())
        return kAdd.invalid(copy + "the source (" + range_text(source, bytes) + ") overlaps the destination of copy " +
                            std::to_string(other->second.copy) + kNoOrder);

    destinations_.push_back(destination);
    sources_.push_back(source);
    sizes_.push_back(bytes);
    written_.emplace(destination, Written{destination_last, index});
    // The union of the sources: merge [source, source_last] with what it touches.
    CUdeviceptr first = source;
    CUdeviceptr last = source_last;
    auto it = read_.upper_bound(first);
    if (it != read_.begin() && std::prev(it)->second >= first) --it;
    while (it != read_.end() && it->first <= last) {
        if (it->first < first) first = it->first;
        if (it->second > last) last = it->second;
        it = read_.erase(it);
    }
    read_.emplace(first, last);
    return ok();
}

void CopyPlan::clear() noexcept {
    destinations_.clear();
    sources_.clear();
    sizes_.clear();
    written_.clear();
    read_.clear();
}

void CopyPlan::reserve(std::size_t copies) {
    destinations_.reserve(copies);
    sources_.reserve(copies);
    sizes_.reserve(copies);
}

// ---- executing ------------------------------------------------------------------------------------

CopyPlan::Path CopyPlan::path_for(StreamRef stream) noexcept {
    // The batch entry refuses the legacy NULL stream (driver 580: 0 and
    // CU_STREAM_LEGACY, INVALID_VALUE, nothing queued), so that stream goes
    // copy by copy without asking. The 13.0 ABI is the one CUDA 13's own
    // headers and runtime call; the 12.8 ABI serves drivers that have only it.
    if (stream.is_legacy_default()) return Path::PerCopy;
    if (has_entry(&DriverTable::cuMemcpyBatchAsync_v13000)) return Path::Batch13000;
    if (has_entry(&DriverTable::cuMemcpyBatchAsync_v12080)) return Path::Batch12080;
    return Path::PerCopy;
}

Result<CopyPlan::Path> CopyPlan::execute(StreamRef stream) const {
    if (empty()) return kExecute.invalid("the plan is empty");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemcpyAsync_v4000));  // the driver is usable
    return detail::in_stream_context(
        stream, [&] { return run(path_for(stream), stream, order_ == SourceAccessOrder::DuringCall); });
}

Result<CopyPlan::Path> CopyPlan::execute() const {
    if (empty()) return kExecute.invalid("the plan is empty");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemcpyAsync_v4000));
    // The wait below also covers DuringCall: every source is read when it returns.
    CUDYN_TRY(run(Path::PerCopy, StreamRef(CU_STREAM_LEGACY), false));
    CUDYN_TRY(detail::finish_on_legacy_stream(ok()));
    return Path::PerCopy;
}

Result<CopyPlan::Path> CopyPlan::execute_via(Path path, StreamRef stream) const {
    if (empty()) return kExecuteVia.invalid("the plan is empty");
    switch (path) {
        case Path::Batch13000: CUDYN_TRY(detail::require_entry(&DriverTable::cuMemcpyBatchAsync_v13000)); break;
        case Path::Batch12080: CUDYN_TRY(detail::require_entry(&DriverTable::cuMemcpyBatchAsync_v12080)); break;
        case Path::PerCopy: CUDYN_TRY(detail::require_entry(&DriverTable::cuMemcpyAsync_v4000)); break;
    }
    if (path != Path::PerCopy && stream.is_legacy_default())
        return kExecuteVia.invalid(
            "a batch on the legacy default stream (0 or CU_STREAM_LEGACY), which cuMemcpyBatchAsync refuses; use a "
            "created stream, the per-thread default stream, or Path::PerCopy");
    return detail::in_stream_context(stream,
                                     [&] { return run(path, stream, order_ == SourceAccessOrder::DuringCall); });
}

namespace {

// What DuringCall promises the caller: every source read when execute
// returns. Issued copies cannot be taken back, so a failed wait says so.
Result<void> wait_until_sources_read(bool wait_for_sources, StreamRef stream, std::size_t count) {
    if (!wait_for_sources) return ok();
    auto waited = call_driver(&DriverTable::cuStreamSynchronize_v2000, stream.handle());
    if (waited) return ok();
    Error error = std::move(waited).error();
    error.message += " (all " + std::to_string(count) +
                     " copies were issued; waiting for them to read their sources, as "
                     "SourceAccessOrder::DuringCall promises, failed)";
    return error;
}

}  // namespace

Result<CopyPlan::Path> CopyPlan::run(Path path, StreamRef stream, bool wait_for_sources) const {
    const std::size_t count = sizes_.size();
    if (path == Path::PerCopy) {
        for (std::size_t i = 0; i < count; ++i) {
            auto issued =
                call_driver(&DriverTable::cuMemcpyAsync_v4000, destinations_[i], sources_[i], sizes_[i], stream.handle());
            if (issued) continue;
            Error error = std::move(issued).error();
            detail::note_failed_step(error, "copy", i, count);
            return error;
        }
        // cuMemcpyAsync reads its source in stream order.
        CUDYN_TRY(wait_until_sources_read(wait_for_sources, stream, count));
        return path;
    }

    // One attribute for every copy (attrIdxs = {0}). The entries take
    // non-const arrays but only read them.
    CUmemcpyAttributes attributes{};
    attributes.srcAccessOrder = driver_order(order_);
    std::size_t first_copy = 0;
    auto* destinations = const_cast<CUdeviceptr*>(destinations_.data());
    auto* sources = const_cast<CUdeviceptr*>(sources_.data());
    auto* sizes = const_cast<std::size_t*>(sizes_.data());
    std::size_t failed = SIZE_MAX;  // the 12.8 ABI's answer; unwritten when it cannot name a copy
    auto issued = path == Path::Batch13000
                      ? call_driver(&DriverTable::cuMemcpyBatchAsync_v13000, destinations, sources, sizes, count,
                                    &attributes, &first_copy, std::size_t{1}, stream.handle())
                      : call_driver(&DriverTable::cuMemcpyBatchAsync_v12080, destinations, sources, sizes, count,
                                    &attributes, &first_copy, std::size_t{1}, &failed, stream.handle());
    if (issued) {
        // DuringCall promises the sources are read when execute returns, but
        // the batch does not keep that promise for pageable memory: driver
        // 580 read the tail of a 64 MiB pageable DURING_API_CALL source
        // after the call had returned.
        CUDYN_TRY(wait_until_sources_read(wait_for_sources, stream, count));
        return path;
    }
    Error error = std::move(issued).error();
    error.message += " (one call for the batch of " + std::to_string(count) + " copies; ";
    if (failed < count)
        error.message += "the driver named copy " + std::to_string(failed + 1) + " of " + std::to_string(count) +
                         ", index " + std::to_string(failed) + ": " + std::to_string(sizes_[failed]) +
                         " bytes from " + detail::hex(sources_[failed]) + " to " + detail::hex(destinations_[failed]);
    else if (path == Path::Batch13000)
        error.message += "the driver did not say which copy failed: its 13.0 ABI reports no index";
    else
        error.message += "the driver did not say which copy failed";
    // Nothing is queued on the stream, but a refused batch is not untouched:
    // driver 580 had carried out host-to-host copies listed before the
    // refused one (wholly or in part) when it returned.
    error.message += "; host-to-host copies listed before the refused one may have been done)";
    return error;
}

}  // namespace cudyn
