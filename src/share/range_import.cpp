// cudyn — import_range and ImportedRange: one reservation, every chunk
// imported and mapped at its offset, access set once over what was mapped.
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "vmm/internal.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

namespace {

constexpr detail::Operation kImport{"import_range"};
constexpr detail::Operation kApply{"ImportedRange::apply"};

// The grants checked against every chunk's memory before anything is done.
Result<void> check_access(const RangeDescriptor& descriptor, const std::vector<AccessGrant>& access,
                          const detail::Operation& op) {
    for (std::size_t i = 0; i < descriptor.chunks.size(); ++i) {
        if (i > 0 && descriptor.chunks[i].location == descriptor.chunks[i - 1].location) continue;
        if (auto checked = detail::check_grants(descriptor.chunks[i].location, access.data(), access.size());
            !checked) {
            Error error = op.context(std::move(checked).error());
            error.message += " (chunk " + std::to_string(i) + ")";
            return error;
        }
    }
    return ok();
}

// Every chunk's memory, imported (its descriptor consumed): all or nothing.
Result<std::vector<PhysicalMemory>> import_chunks(std::vector<RangeChunk>& chunks, const detail::Operation& op) {
    std::vector<PhysicalMemory> memory;
    memory.reserve(chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        RangeChunk& chunk = chunks[i];
        PhysicalMemoryInfo info;
        info.size_bytes = chunk.size_bytes;
        info.granularity = chunk.size_bytes;  // stands in where this driver cannot say
        info.handle_type = chunk.handle_type;
        Result<PhysicalMemory> imported = [&]() -> Result<PhysicalMemory> {
            if (chunk.handle_type == HandleType::PosixFileDescriptor)
                return import_memory_fd(MemoryFdDescriptor{std::move(chunk.fd), info});
            auto fabric = detail::RecordAccess::make<MemoryFabricDescriptor>();
            detail::RecordAccess::fields(fabric).info = info;
            detail::RecordAccess::fields(fabric).handle = chunk.fabric;
            return import_memory_fabric(fabric);
        }();
        if (!imported) {
            Error error = op.context(std::move(imported).error());
            error.message += " (chunk " + std::to_string(i) + " at offset " + std::to_string(chunk.offset_bytes) + ")";
            return error;
        }
        // Listed once, as the range, not chunk by chunk.
        detail::VmmAccess::record(*imported)->listed.close();
        memory.push_back(std::move(*imported));
    }
    return memory;
}

// Copies of `chunks` with descriptors of their own: what an import keeps to
// import the chunks again after a checkpoint.
Result<std::vector<RangeChunk>> duplicate_chunks(const std::vector<RangeChunk>& chunks, std::size_t from,
                                                 const detail::Operation& op) {
    std::vector<RangeChunk> copies;
    copies.reserve(chunks.size() - std::min(from, chunks.size()));
    for (std::size_t i = from; i < chunks.size(); ++i) {
        auto same = chunks[i].duplicate();
        if (!same) {
            Error error = op.context(std::move(same).error());
            error.message += " (keeping the descriptor of chunk " + std::to_string(i) + ")";
            return error;
        }
        copies.push_back(std::move(*same));
    }
    return copies;
}

// A descriptor's own descriptors are closed when it goes: a refusal before
// the import closes them too (the caller gave the descriptor away).
void close_all(RangeDescriptor& descriptor) noexcept {
    for (RangeChunk& chunk : descriptor.chunks) (void)chunk.fd.close();
}

}  // namespace

std::size_t ImportedRange::size_bytes() const noexcept {
    if (held_->chunks.empty()) return 0;
    const MappedRange& last = held_->chunks.back();
    return last.offset_bytes() + last.size_bytes();
}

Result<void> ImportedRange::Held::map_chunks(const std::vector<RangeChunk>& new_chunks,
                                             const std::vector<PhysicalMemory>& memory) {
    const std::size_t before = chunks.size();
    auto mapped = [&]() -> Result<void> {
        for (std::size_t i = 0; i < memory.size(); ++i) {
            CUDYN_TRY_ASSIGN(MappedRange mapping,
                             MappedRange::map(range, static_cast<std::size_t>(new_chunks[i].offset_bytes), memory[i]));
            // The import's wait covers every chunk at once (Held::unmap_to).
            mapping.set_teardown(Teardown::CallerSynchronized);
            chunks.push_back(std::move(mapping));
        }
        if (memory.empty()) return ok();
        const std::size_t offset = static_cast<std::size_t>(new_chunks.front().offset_bytes);
        const std::size_t end = static_cast<std::size_t>(new_chunks.back().offset_bytes + new_chunks.back().size_bytes);
        return detail::set_access_over(range, offset, end - offset, access.data(), access.size(), kImport);
    }();
    if (!mapped) (void)unmap_to(before);
    return mapped;
}

Result<void> ImportedRange::Held::unmap_to(std::size_t count) {
    if (chunks.size() <= count) return ok();
    if (teardown == Teardown::WaitForDevice)
        CUDYN_TRY(detail::wait_for_device_users(context, detail::granted_devices(access.data(), access.size())));
    while (chunks.size() > count) {
        CUDYN_TRY(chunks.back().unmap());
        chunks.pop_back();
    }
    return ok();
}

Result<void> ImportedRange::Held::remap_kept(const char* operation) {
    const detail::Operation op{operation};
    // A chunk unmapped whose memory the driver would not take back yet: let
    // go of it now (a retry of its release), then import it afresh.
    while (!chunks.empty() && chunks.back().empty()) {
        if (auto released = chunks.back().unmap(); !released) return op.context(std::move(released).error());
        chunks.pop_back();
    }
    CUDYN_TRY_ASSIGN(std::vector<RangeChunk> copies, duplicate_chunks(kept, chunks.size(), op));
    CUDYN_TRY_ASSIGN(std::vector<PhysicalMemory> memory, import_chunks(copies, op));
    if (auto mapped = map_chunks(copies, memory); !mapped) return op.context(std::move(mapped).error());
    return ok();
}

void ImportedRange::Held::list() noexcept {
    listed = detail::import_open(LiveImport{ImportKind::Range, context.empty() ? -1 : static_cast<int>(context.device()),
                                            static_cast<std::uintptr_t>(range.device_address()), range.size_bytes()});
}

Result<void> ImportedRange::suspend() {
    constexpr detail::Operation kSuspend{"ImportedRange::suspend"};
    if (empty()) return kSuspend.invalid("nothing is imported");
    Held& held = held_.get();
    if (held.suspended) return kSuspend.invalid("already suspended");
    const std::size_t mapped = held.chunks.size();
    auto unmapped = held.unmap_to(0);
    if (unmapped) {
        held.suspended = true;
        held.listed.close();
        return ok();
    }
    Error error = kSuspend.context(std::move(unmapped).error());
    const bool untouched = held.chunks.size() == mapped &&
                           std::none_of(held.chunks.begin(), held.chunks.end(),
                                        [](const MappedRange& chunk) { return chunk.empty(); });
    if (untouched) return error;  // refused before any unmap: as it was
    if (auto back = held.remap_kept(kSuspend.name()); !back) {
        held.suspended = true;  // resume() maps the rest
        const auto still = std::count_if(held.chunks.begin(), held.chunks.end(),
                                         [](const MappedRange& chunk) { return !chunk.empty(); });
        error.message += "; " + std::to_string(still) + " of " + std::to_string(mapped) +
                         " chunks are mapped and the range is suspended (resume() maps the rest): " +
                         back.error().describe();
    } else {
        error.message += "; every chunk is mapped again, the range as it was";
    }
    return error;
}

Result<void> ImportedRange::resume() {
    constexpr detail::Operation kResume{"ImportedRange::resume"};
    if (empty() || !held_->suspended) return kResume.invalid("not suspended (suspend() first)");
    Held& held = held_.get();
    CUDYN_TRY(held.remap_kept(kResume.name()));
    held.suspended = false;
    if (!held.listed.listed()) held.list();
    return ok();
}

Result<void> ImportedRange::Held::release() {
    CUDYN_TRY(unmap_to(0));
    CUDYN_TRY(range.free());
    context.reset();
    kept.clear();  // the kept descriptors close
    listed.close();
    suspended = false;
    return ok();
}

Result<ImportedRange> import_range(RangeDescriptor descriptor, std::vector<AccessGrant> access) {
    auto checked = [&]() -> Result<void> {
        if (descriptor.is_update())
            return kImport.invalid("the descriptor is an update of generation " +
                                   std::to_string(descriptor.base_generation) +
                                   "; import a whole layout (RangeExporter::describe) and apply updates to it");
        CUDYN_TRY(descriptor.validate());
        if (descriptor.exporter.is_this_process())
            return kImport.invalid("this process exported the range: use its memory directly");
        return ok();
    }();
    if (!checked) {
        close_all(descriptor);
        return std::move(checked).error();
    }
    if (access.empty()) {
        auto device = detail::judging_device(Location::host());
        if (!device) return kImport.context(std::move(device).error());
        access.push_back({Location::device(*device), AccessFlags::ReadWrite});
    }
    CUDYN_TRY(check_access(descriptor, access, kImport));

    ImportedRange::Held held;
    CUDYN_TRY_ASSIGN(held.context, detail::OwnerContext::current());
    held.access = std::move(access);
    held.exporter = descriptor.exporter;
    held.range_id = descriptor.range_id;
    CUDYN_TRY_ASSIGN(held.kept, duplicate_chunks(descriptor.chunks, 0, kImport));
    CUDYN_TRY_ASSIGN(std::vector<PhysicalMemory> memory, import_chunks(descriptor.chunks, kImport));
    CUDYN_TRY_ASSIGN(held.range, AddressRange::reserve(static_cast<std::size_t>(descriptor.reserved_bytes),
                                                       static_cast<std::size_t>(descriptor.alignment_bytes)));
    held.chunks.reserve(memory.size());
    CUDYN_TRY(held.map_chunks(descriptor.chunks, memory));
    held.generation = descriptor.generation;
    held.list();
    // `memory` goes now: each mapping holds its own reference.
    return ImportedRange(std::move(held));
}

Result<void> ImportedRange::apply(RangeDescriptor update) {
    Held& held = held_.get();
    auto checked = [&]() -> Result<void> {
        if (empty()) return kApply.invalid("nothing is imported");
        if (held.suspended) return kApply.invalid("the range is suspended for a checkpoint: resume() first");
        if (!update.is_update())
            return kApply.invalid("the descriptor is a whole layout (generation " +
                                  std::to_string(update.generation) + "), not an update: import it with import_range");
        CUDYN_TRY(update.validate());
        if (update.exporter != held.exporter || update.range_id != held.range_id)
            return kApply.invalid("the update is for another range (range " + detail::hex(update.range_id) +
                                  " of exporter pid " + std::to_string(update.exporter.pid()) + "; this is range " +
                                  detail::hex(held.range_id) + " of pid " + std::to_string(held.exporter.pid()) + ")");
        if (update.reserved_bytes != held.range.size_bytes())
            return kApply.invalid("the update's reserved size " + std::to_string(update.reserved_bytes) +
                                  " is not the range's " + std::to_string(held.range.size_bytes()));
        if (update.base_generation != held.generation)
            return kApply.invalid("the update applies to generation " + std::to_string(update.base_generation) +
                                  ", this range is at generation " + std::to_string(held.generation) +
                                  (update.base_generation < held.generation ? " (a stale update)"
                                                                            : " (an update missed in between)"));
        if (update.kept_chunks > held.chunks.size())
            return kApply.invalid("the update keeps " + std::to_string(update.kept_chunks) + " chunks, " +
                                  std::to_string(held.chunks.size()) + " are mapped");
        std::uint64_t kept_end = 0;
        if (update.kept_chunks > 0) {
            const MappedRange& last = held.chunks[static_cast<std::size_t>(update.kept_chunks - 1)];
            kept_end = last.offset_bytes() + last.size_bytes();
        }
        if (!update.chunks.empty() && update.chunks.front().offset_bytes != kept_end)
            return kApply.invalid("the update's first chunk starts at offset " +
                                  std::to_string(update.chunks.front().offset_bytes) + ", the kept chunks end at " +
                                  std::to_string(kept_end));
        return ok();
    }();
    if (!checked) {
        close_all(update);
        return std::move(checked).error();
    }
    CUDYN_TRY(check_access(update, held.access, kApply));
    CUDYN_TRY_ASSIGN(std::vector<RangeChunk> keep, duplicate_chunks(update.chunks, 0, kApply));
    // Imported first: a refusal here leaves the range as it was.
    CUDYN_TRY_ASSIGN(std::vector<PhysicalMemory> memory, import_chunks(update.chunks, kApply));
    if (auto unmapped = held.unmap_to(static_cast<std::size_t>(update.kept_chunks)); !unmapped)
        return kApply.context(std::move(unmapped).error());
    held.kept.resize(held.chunks.size());
    if (auto mapped = held.map_chunks(update.chunks, memory); !mapped) return kApply.context(std::move(mapped).error());
    for (RangeChunk& chunk : keep) held.kept.push_back(std::move(chunk));
    held.generation = update.generation;
    return ok();
}

}  // namespace cudyn
