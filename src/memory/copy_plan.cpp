// cudyn — CopyPlan: one cuMemcpyBatchAsync (13.0 or 12.8 ABI) where the
// driver and the stream allow it, one cuMemcpyAsync per copy otherwise.
#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "core/internal.hpp"
#include "device/device_facts.hpp"
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

CUmemcpyAttributes attributes_for(const CopyOptions& options, SourceAccessOrder order) noexcept {
    CUmemcpyAttributes attributes{};
    attributes.srcAccessOrder = driver_order(order);
    // A zeroed CUmemLocation (type INVALID) is "no hint".
    if (options.source_hint) attributes.srcLocHint = options.source_hint->to_cu();
    if (options.destination_hint) attributes.dstLocHint = options.destination_hint->to_cu();
    if (options.prefer_overlap_with_compute) attributes.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    return attributes;
}

Result<void> validate_options(const CopyOptions& options, const char* what) {
    const std::string name(what);
    if (options.source_hint) CUDYN_TRY(options.source_hint->validate((name + ": the source hint").c_str()));
    if (options.destination_hint)
        CUDYN_TRY(options.destination_hint->validate((name + ": the destination hint").c_str()));
    return ok();
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
    const std::string copy = copy_text(size());
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
    CUDYN_TRY_ASSIGN(const std::size_t bytes, detail::byte_size(source.count, element_size, "CopyPlan::add: count"));
    return add_range(destination.address, source.address, bytes);
}

Result<void> CopyPlan::add_bytes(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes) {
    const std::string copy = copy_text(size());
    if (destination == 0) return kAdd.invalid(copy + "the destination is address 0");
    if (source == 0) return kAdd.invalid(copy + "the source is address 0");
    if (bytes == 0) return kAdd.invalid(copy + "0 bytes (the driver refuses empty copies)");
    return add_range(destination, source, bytes);
}

Result<void> CopyPlan::add_range(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes) {
    const std::size_t index = size();
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
    const std::vector<Interval> written{{destination, destination_last}};
    const std::vector<Interval> read{{source, source_last}};
    CUDYN_TRY(check_dependencies(index, written, read));
    destinations_.push_back(destination);
    sources_.push_back(source);
    sizes_.push_back(bytes);
    if (!options_1d_.empty()) options_1d_.push_back(0);
    record(index, written, read);
    return ok();
}

// The copies of a batch run in no order: none may write what another reads or writes.
Result<void> CopyPlan::check_dependencies(std::size_t index, const std::vector<Interval>& written,
                                          const std::vector<Interval>& read) const {
    const std::string copy = copy_text(index);
    constexpr const char* kNoOrder = " (the copies of a plan run in no particular order)";
    const auto text = [](const Interval& range) { return range_text(range.first, range.last - range.first + 1); };
    for (const Interval& range : written) {
        if (auto other = overlapping(written_, range.first, range.last); other != written_.end())
            return kAdd.invalid(copy + "the destination (" + text(range) + ") overlaps the destination of copy " +
                                std::to_string(other->second.copy) + kNoOrder);
        if (overlapping(read_, range.first, range.last) != read_.end())
            return kAdd.invalid(copy + "the destination (" + text(range) + ") overlaps the source of an earlier copy" +
                                kNoOrder);
    }
    for (const Interval& range : read)
        if (auto other = overlapping(written_, range.first, range.last); other != written_.end())
            return kAdd.invalid(copy + "the source (" + text(range) + ") overlaps the destination of copy " +
                                std::to_string(other->second.copy) + kNoOrder);
    return ok();
}

void CopyPlan::record(std::size_t index, const std::vector<Interval>& written, const std::vector<Interval>& read) {
    for (const Interval& range : written) written_.emplace(range.first, Written{range.last, index});
    // The union of the sources: merge each range with what it touches.
    for (const Interval& range : read) {
        CUdeviceptr first = range.first;
        CUdeviceptr last = range.last;
        auto it = read_.upper_bound(first);
        if (it != read_.begin() && std::prev(it)->second >= first) --it;
        while (it != read_.end() && it->first <= last) {
            if (it->first < first) first = it->first;
            if (it->second > last) last = it->second;
            it = read_.erase(it);
        }
        read_.emplace(first, last);
    }
}

std::vector<CopyPlan::Interval> CopyPlan::box_rows(const PitchedSpan& span, const Offset3D& offset,
                                                   const Extent3D& extent) {
    std::vector<Interval> rows;
    for (std::size_t z = 0; z < extent.depth; ++z)
        for (std::size_t y = 0; y < extent.height; ++y) {
            const CUdeviceptr first = detail::pitched_address(span, Offset3D{offset.x_bytes, offset.y + y, offset.z + z});
            const CUdeviceptr last = first + (extent.width_bytes - 1);
            if (!rows.empty() && rows.back().last + 1 == first) rows.back().last = last;
            else rows.push_back({first, last});
        }
    return rows;
}

Result<void> CopyPlan::add_3d(const PitchedCopy& copy) {
    const std::size_t index = size();
    const std::string name = std::string(kAdd.name()) + "_3d: copy " + std::to_string(index);
    CUDYN_TRY(detail::check_pitched_copy(copy, name.c_str()));
    const std::vector<Interval> written = box_rows(copy.destination, copy.destination_offset, copy.extent);
    const std::vector<Interval> read = box_rows(copy.source, copy.source_offset, copy.extent);
    // Its own source and destination first: no row it reads may be one it writes.
    std::map<CUdeviceptr, CUdeviceptr> own;
    for (const Interval& range : written) own.emplace(range.first, range.last);
    for (const Interval& range : read)
        if (overlapping(own, range.first, range.last) != own.end())
            return kAdd.invalid(copy_text(index) + "the source box overlaps its destination box (" +
                                range_text(range.first, range.last - range.first + 1) +
                                "): copies are memcpy, not memmove");
    CUDYN_TRY(check_dependencies(index, written, read));

    CUDA_MEMCPY3D_BATCH_OP op{};
    const auto operand = [](const PitchedSpan& span, const Offset3D& offset, CUmemcpy3DOperand& side) {
        side.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        side.op.ptr.ptr = detail::pitched_address(span, offset);
        side.op.ptr.rowLength = span.pitch();  // elements of 1 byte between pointer copies
        side.op.ptr.layerHeight = span.height();
    };
    operand(copy.source, copy.source_offset, op.src);
    operand(copy.destination, copy.destination_offset, op.dst);
    op.extent.width = copy.extent.width_bytes;
    op.extent.height = copy.extent.height;
    op.extent.depth = copy.extent.depth;
    op.srcAccessOrder = driver_order(order_);
    copies_3d_.push_back(copy);
    ops_3d_.push_back(op);
    options_3d_.push_back(0);
    record(index, written, read);
    return ok();
}

Result<void> CopyPlan::add_bytes(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes,
                                 const CopyOptions& options) {
    CUDYN_TRY(validate_options(options, kAdd.name()));
    CUDYN_TRY(add_bytes(destination, source, bytes));
    const std::size_t index = options_index(options);
    if (index != 0) {
        if (options_1d_.empty()) options_1d_.assign(sizes_.size(), 0);
        options_1d_.back() = index;
    }
    return ok();
}

Result<void> CopyPlan::add_3d(const PitchedCopy& copy, const CopyOptions& options) {
    CUDYN_TRY(validate_options(options, kAdd.name()));
    CUDYN_TRY(add_3d(copy));
    options_3d_.back() = options_index(options);
    return ok();
}

Result<void> CopyPlan::set_options(const CopyOptions& options) {
    CUDYN_TRY(validate_options(options, "CopyPlan::set_options"));
    options_ = options;
    return ok();
}

std::size_t CopyPlan::options_index(const CopyOptions& options) {
    if (options == options_) return 0;
    for (std::size_t k = 0; k < own_options_.size(); ++k)
        if (own_options_[k] == options) return k + 1;
    own_options_.push_back(options);
    return own_options_.size();
}

// A device hint must name a visible device: checked here, before the batch,
// so the error says which hint (the driver's INVALID_VALUE would not).
Result<void> CopyPlan::check_options() const {
    if (!uses_options()) return ok();
    CUDYN_TRY_ASSIGN(const int devices, detail::visible_device_count());
    const auto check = [devices](const std::optional<Location>& hint, const std::string& what) -> Result<void> {
        if (!hint || hint->kind() != LocationKind::Device || hint->id() < devices) return ok();
        return kExecute.invalid(what + " (" + hint->describe() + ") is not one of the " + std::to_string(devices) +
                                " visible devices");
    };
    for (std::size_t k = 0; k <= own_options_.size(); ++k) {
        const std::string whose = k == 0 ? std::string("the plan's") : "copy options set " + std::to_string(k) + "'s";
        CUDYN_TRY(check(options_of(k).source_hint, whose + " source location hint"));
        CUDYN_TRY(check(options_of(k).destination_hint, whose + " destination location hint"));
    }
    return ok();
}

void CopyPlan::clear() noexcept {
    own_options_.clear();
    options_1d_.clear();
    options_3d_.clear();
    copies_3d_.clear();
    ops_3d_.clear();
    destinations_.clear();
    sources_.clear();
    sizes_.clear();
    written_.clear();
    read_.clear();
}

void CopyPlan::set_source_order(SourceAccessOrder order) noexcept {
    order_ = order;
    for (CUDA_MEMCPY3D_BATCH_OP& op : ops_3d_) op.srcAccessOrder = driver_order(order);
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
    CUDYN_TRY(check_options());
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
    CUDYN_TRY(check_options());
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
    if (!sizes_.empty()) CUDYN_TRY(run_1d(path, stream));
    if (!ops_3d_.empty()) {
        auto issued = run_3d(path, stream);
        if (!issued) {
            Error error = std::move(issued).error();
            if (!sizes_.empty())
                error.message += " (the plan's " + std::to_string(sizes_.size()) + " 1D copies had been issued)";
            return error;
        }
    }
    // cuMemcpyAsync reads its source in stream order, and the batch does not
    // keep DuringCall's promise for pageable memory: driver 580 read the tail
    // of a 64 MiB pageable DURING_API_CALL source after the call had returned.
    CUDYN_TRY(wait_until_sources_read(wait_for_sources, stream, size()));
    return path;
}

Result<void> CopyPlan::run_3d(Path path, StreamRef stream) const {
    const std::size_t count = ops_3d_.size();
    const std::size_t first = sizes_.size();  // the 3D copies' numbers follow the 1D ones
    const bool v13000 = path == Path::Batch13000 && has_entry(&DriverTable::cuMemcpy3DBatchAsync_v13000);
    const bool v12080 = path == Path::Batch12080 && has_entry(&DriverTable::cuMemcpy3DBatchAsync_v12080);
    if (!v13000 && !v12080) {
        for (std::size_t i = 0; i < count; ++i) {
            const CUDA_MEMCPY3D d = detail::copy_descriptor(copies_3d_[i]);
            auto issued = call_driver(&DriverTable::cuMemcpy3DAsync_v3020, &d, stream.handle());
            if (issued) continue;
            Error error = std::move(issued).error();
            detail::note_failed_step(error, "3D copy", i, count);
            error.message += " (plan copy " + std::to_string(first + i) + ")";
            return error;
        }
        return ok();
    }
    // The entries take a non-const array but only read it.
    auto* ops = const_cast<CUDA_MEMCPY3D_BATCH_OP*>(ops_3d_.data());
    std::vector<CUDA_MEMCPY3D_BATCH_OP> with_options;
    if (uses_options()) {
        with_options = ops_3d_;
        for (std::size_t i = 0; i < count; ++i) {
            const CUmemcpyAttributes a = attributes_for(options_of(options_3d_[i]), order_);
            with_options[i].src.op.ptr.locHint = a.srcLocHint;
            with_options[i].dst.op.ptr.locHint = a.dstLocHint;
            with_options[i].flags = a.flags;
        }
        ops = with_options.data();
    }
    std::size_t failed = SIZE_MAX;
    auto issued = v13000 ? call_driver(&DriverTable::cuMemcpy3DBatchAsync_v13000, count, ops, 0ull, stream.handle())
                         : call_driver(&DriverTable::cuMemcpy3DBatchAsync_v12080, count, ops, &failed, 0ull,
                                       stream.handle());
    if (issued) return ok();
    Error error = std::move(issued).error();
    error.message += " (one cuMemcpy3DBatchAsync call for the " + std::to_string(count) + " 3D copies; ";
    if (failed < count)
        error.message += "the driver named 3D copy index " + std::to_string(failed) + ", plan copy " +
                         std::to_string(first + failed);
    else
        error.message += v13000 ? "its 13.0 ABI reports no index" : "the driver did not say which copy failed";
    error.message += "; nothing of the batch was queued";
    if (uses_options()) error.message += "; the copies carry location hints or the overlap flag, which it checks too";
    error.message += ")";
    return error;
}

Result<void> CopyPlan::run_1d(Path path, StreamRef stream) const {
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
        return ok();
    }

    // One attribute for every copy (attrIdxs = {0}) unless copies brought
    // their own options. The entries take non-const arrays but only read them.
    CUmemcpyAttributes attributes = attributes_for(options_, order_);
    std::size_t first_copy = 0;
    auto* destinations = const_cast<CUdeviceptr*>(destinations_.data());
    auto* sources = const_cast<CUdeviceptr*>(sources_.data());
    auto* sizes = const_cast<std::size_t*>(sizes_.data());
    CUmemcpyAttributes* attribute_list = &attributes;
    std::size_t* attribute_starts = &first_copy;
    std::size_t attribute_count = 1;
    // With several option sets the copies are laid out grouped by set (a
    // batch has no order anyway); `original` maps a position back.
    std::vector<CUdeviceptr> grouped_destinations, grouped_sources;
    std::vector<std::size_t> grouped_sizes, original, starts;
    std::vector<CUmemcpyAttributes> grouped_attributes;
    if (!options_1d_.empty()) {
        for (std::size_t k = 0; k <= own_options_.size(); ++k) {
            const std::size_t start = original.size();
            for (std::size_t i = 0; i < count; ++i) {
                if (options_1d_[i] != k) continue;
                grouped_destinations.push_back(destinations_[i]);
                grouped_sources.push_back(sources_[i]);
                grouped_sizes.push_back(sizes_[i]);
                original.push_back(i);
            }
            if (original.size() == start) continue;
            starts.push_back(start);
            grouped_attributes.push_back(attributes_for(options_of(k), order_));
        }
        destinations = grouped_destinations.data();
        sources = grouped_sources.data();
        sizes = grouped_sizes.data();
        attribute_list = grouped_attributes.data();
        attribute_starts = starts.data();
        attribute_count = starts.size();
    }
    std::size_t failed = SIZE_MAX;  // the 12.8 ABI's answer; unwritten when it cannot name a copy
    auto issued = path == Path::Batch13000
                      ? call_driver(&DriverTable::cuMemcpyBatchAsync_v13000, destinations, sources, sizes, count,
                                    attribute_list, attribute_starts, attribute_count, stream.handle())
                      : call_driver(&DriverTable::cuMemcpyBatchAsync_v12080, destinations, sources, sizes, count,
                                    attribute_list, attribute_starts, attribute_count, &failed, stream.handle());
    if (issued) return ok();
    if (failed < count && !original.empty()) failed = original[failed];
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
    error.message += "; host-to-host copies listed before the refused one may have been done";
    if (uses_options()) error.message += "; the copies carry location hints or the overlap flag, which it checks too";
    error.message += ")";
    return error;
}

}  // namespace cudyn
