// cudyn — RangeExporter: what is mapped in a range (the driver's mappings,
// walked from the range's start), and each chunk's shareable handle.
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "share/internal.hpp"
#include "vmm/internal.hpp"

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cudyn {

namespace {

constexpr detail::Operation kCreate{"RangeExporter::create"};
constexpr detail::Operation kDescribe{"RangeExporter::describe"};
constexpr detail::Operation kUpdate{"RangeExporter::update"};

using Chunk = RangeExporter::Chunk;

// A reference cuMemRetainAllocationHandle gave, released by give_back() (its
// refusal reported) or, failing that, by the destructor, once more, silently.
class Retained {
public:
    explicit Retained(CUmemGenericAllocationHandle handle) noexcept : handle_(handle) {}
    Retained(const Retained&) = delete;
    Retained& operator=(const Retained&) = delete;
    ~Retained() {
        if (handle_ != 0) (void)call_driver(&DriverTable::cuMemRelease_v10020, handle_);
    }
    CUmemGenericAllocationHandle get() const noexcept { return handle_; }
    // Hands the reference to a new owner.
    CUmemGenericAllocationHandle take() noexcept { return std::exchange(handle_, 0); }
    Result<void> give_back() {
        CUDYN_TRY(call_driver(&DriverTable::cuMemRelease_v10020, handle_));
        handle_ = 0;
        return ok();
    }

private:
    CUmemGenericAllocationHandle handle_;
};

// The chunks mapped from `base` up to the first unmapped byte of the
// `reserved` bytes: each mapping's place and physical handle (a retained
// reference, given back at once: only its value is kept).
Result<std::vector<Chunk>> mapped_prefix(CUdeviceptr base, std::size_t reserved, const detail::Operation& op) {
    std::vector<Chunk> chunks;
    std::uint64_t offset = 0;
    while (offset < reserved) {
        const CUdeviceptr address = base + offset;
        auto mapping = detail::read_mapping(address);
        if (!mapping) {
            if (mapping.error().driver_result == CUDA_ERROR_INVALID_VALUE) break;  // nothing mapped here
            return op.context(std::move(mapping).error());
        }
        if (mapping->base != address || mapping->size == 0 || mapping->size > reserved - offset)
            return op.context(Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute",
                                                 "the driver reported a mapping at " + detail::hex(mapping->base) +
                                                     " of " + std::to_string(mapping->size) + " bytes for address " +
                                                     detail::hex(address)));
        CUDYN_TRY_ASSIGN(const auto retained, detail::retain_vmm(address));
        if (!retained)
            return op.not_supported("cuMemRetainAllocationHandle",
                                    "the driver gives no handle for the mapping at " + detail::hex(address) +
                                        " (it has no cuMemRetainAllocationHandle, CUDA 11.0)");
        Retained reference(*retained);
        CUDYN_TRY(reference.give_back());
        chunks.push_back(Chunk{offset, mapping->size, *retained});
        offset += mapping->size;
    }
    return chunks;
}

// The physical memory of a chunk still mapped where it was published: a
// retained reference, given back when the PhysicalMemory goes.
Result<PhysicalMemory> chunk_memory(CUdeviceptr base, const Chunk& chunk, const detail::Operation& op) {
    CUDYN_TRY_ASSIGN(const auto retained, detail::retain_vmm(base + chunk.offset));
    Retained reference(retained ? *retained : 0);
    if (!retained || *retained != chunk.handle) {
        if (retained) CUDYN_TRY(reference.give_back());
        return op.invalid("the chunk at offset " + std::to_string(chunk.offset) +
                          " is no longer mapped there: the range changed since it was published (take an update())");
    }
    PhysicalMemoryInfo info;
    info.size_bytes = chunk.size;
    info.granularity = chunk.size;  // where the driver cannot say (a size is a multiple of itself)
    return detail::adopt_imported(reference.take(), info, op);
}

// The handle of one chunk's memory, as the range carries it.
Result<RangeChunk> export_chunk(CUdeviceptr base, const Chunk& chunk, const detail::Operation& op) {
    CUDYN_TRY_ASSIGN(PhysicalMemory memory, chunk_memory(base, chunk, op));
    const Location location = memory.properties()->location();
    CUDYN_TRY_ASSIGN(detail::AllocationParts parts,
                     detail::export_vmm_parts(memory, location.kind() == LocationKind::Device ? location.id() : 0));
    RangeChunk out;
    out.offset_bytes = chunk.offset;
    out.size_bytes = chunk.size;
    out.location = location;
    if (auto* fd = std::get_if<detail::VmmFdParts>(&parts)) {
        out.handle_type = HandleType::PosixFileDescriptor;
        out.fd = std::move(fd->memory.fd);
    } else {
        out.handle_type = HandleType::Fabric;
        out.fabric = std::get<detail::VmmFabricParts>(parts).memory.handle();
    }
    // The retained reference goes back now, its refusal reported.
    CUDYN_TRY(memory.release());
    return out;
}

// The chunks must suit the alignment the importer reserves with.
Result<void> check_alignment(std::size_t alignment, const std::vector<Chunk>& chunks) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return kCreate.invalid("the range's alignment " + std::to_string(alignment) + " is not a power of two");
    for (const Chunk& chunk : chunks)
        if (chunk.offset % alignment != 0 || chunk.size % alignment != 0)
            return kCreate.invalid("the chunk at offset " + std::to_string(chunk.offset) + " (" +
                                   std::to_string(chunk.size) + " bytes) is not aligned to " +
                                   std::to_string(alignment));
    return ok();
}

}  // namespace

Result<RangeExporter> RangeExporter::create(const GrowableBuffer& buffer) {
    if (buffer.empty()) return kCreate.invalid("the GrowableBuffer is empty (moved from)");
    const AllocationProperties& properties = buffer.properties();
    if (!includes(properties.handle_types(), HandleType::PosixFileDescriptor) &&
        !includes(properties.handle_types(), HandleType::Fabric))
        return kCreate.not_supported({}, "the GrowableBuffer's memory (" + properties.describe() +
                                             ") was created without a shareable handle type; create it with "
                                             "AllocationProperties::with_handle_types(HandleType::PosixFileDescriptor)");
    CUDYN_TRY_ASSIGN(const std::size_t granularity, detail::query_granularity(properties, Granularity::Minimum));
    CUDYN_TRY_ASSIGN(auto chunks, mapped_prefix(buffer.device_address(), buffer.capacity_bytes(), kCreate));
    CUDYN_TRY(check_alignment(granularity, chunks));
    return RangeExporter(buffer.device_address(), buffer.capacity_bytes(), granularity, std::move(chunks));
}

Result<RangeExporter> RangeExporter::create(CUdeviceptr address) {
    if (address == 0) return kCreate.invalid("address is null");
    CUDYN_TRY_ASSIGN(const auto retained, detail::retain_vmm(address));
    if (!retained)
        return kCreate.invalid("address " + detail::hex(address) +
                               " is not mapped VMM memory (cuMemCreate memory mapped with cuMemMap)");
    CUDYN_TRY(Retained(*retained).give_back());
    void* start = nullptr;
    std::size_t reserved = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&start),
                          CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address));
    CUDYN_TRY(call_driver(&DriverTable::cuPointerGetAttribute_v4000, static_cast<void*>(&reserved),
                          CU_POINTER_ATTRIBUTE_RANGE_SIZE, address));
    const auto base = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(start));
    CUDYN_TRY_ASSIGN(auto chunks, mapped_prefix(base, reserved, kCreate));
    if (chunks.empty())
        return kCreate.invalid("the range at " + detail::hex(base) + " has nothing mapped at its start");
    // The first chunk's granularity aligns the importer's reservation.
    CUDYN_TRY_ASSIGN(PhysicalMemory first, chunk_memory(base, chunks.front(), kCreate));
    const std::size_t alignment = first.granularity();
    CUDYN_TRY(first.release());
    CUDYN_TRY(check_alignment(alignment, chunks));
    return RangeExporter(base, reserved, alignment, std::move(chunks));
}

std::uint64_t RangeExporter::size_bytes() const noexcept {
    return published_.empty() ? 0 : published_.back().offset + published_.back().size;
}

Result<RangeDescriptor> RangeExporter::exported(const std::vector<Chunk>& chunks, std::size_t first) const {
    RangeDescriptor descriptor;
    descriptor.exporter = detail::RecordAccess::this_exporter();
    descriptor.range_id = base_;
    descriptor.reserved_bytes = reserved_;
    descriptor.alignment_bytes = alignment_;
    descriptor.chunks.reserve(chunks.size() - first);
    const detail::Operation& op = first == 0 ? kDescribe : kUpdate;
    for (std::size_t i = first; i < chunks.size(); ++i) {
        CUDYN_TRY_ASSIGN(RangeChunk chunk, export_chunk(base_, chunks[i], op));
        descriptor.chunks.push_back(std::move(chunk));
    }
    return descriptor;
}

Result<RangeDescriptor> RangeExporter::describe() const {
    if (empty()) return kDescribe.invalid("the exporter is empty");
    CUDYN_TRY_ASSIGN(RangeDescriptor descriptor, exported(published_, 0));
    descriptor.generation = generation_;
    return descriptor;
}

Result<RangeDescriptor> RangeExporter::update() {
    if (empty()) return kUpdate.invalid("the exporter is empty");
    CUDYN_TRY_ASSIGN(auto now, mapped_prefix(base_, reserved_, kUpdate));
    std::size_t kept = 0;
    while (kept < now.size() && kept < published_.size() && now[kept].offset == published_[kept].offset &&
           now[kept].size == published_[kept].size && now[kept].handle == published_[kept].handle)
        ++kept;
    // Only what follows the kept chunks is exported; it is what changed.
    CUDYN_TRY_ASSIGN(RangeDescriptor descriptor, exported(now, kept));
    descriptor.base_generation = generation_;
    descriptor.generation = generation_ + 1;
    descriptor.kept_chunks = kept;
    // Published only once everything worked: a failure leaves the last generation.
    generation_ += 1;
    published_ = std::move(now);
    return descriptor;
}

}  // namespace cudyn
