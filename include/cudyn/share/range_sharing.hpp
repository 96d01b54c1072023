// cudyn — sharing a whole VMM range (a reservation backed by many physical
// chunks, such as a GrowableBuffer) with another process, and letting that
// process follow the range as it grows, shrinks or is released and restored.
//
//   exporter                                   importer
//   RangeExporter::create(buffer)
//   send_descriptor(channel, describe())  -->  import_range(receive_range(channel))
//   buffer.grow_to(...)
//   send_descriptor(channel, update())    -->  imported.apply(receive_range(channel))
//
// A RangeDescriptor names the reservation (its size and alignment), then each
// chunk: its offset, size, where its memory lives, and its shareable handle
// (a POSIX file descriptor, or a fabric handle for memory created with only
// the fabric type where this machine has fabric). A range shares its mapped
// prefix: the chunks from offset 0 up to the first unmapped byte, the part a
// GrowableBuffer maps. An update names only what changed since the
// generation before it: how many chunks the importer keeps, and the chunks
// after them. The importer's base address never moves, and the bytes of the
// chunks it keeps are untouched.
//
// The driver keeps a physical chunk alive while any process maps it: when the
// exporter shrinks or releases its range, the importer still reads the old
// chunks' bytes (and the exporter's device memory is not given back) until
// it applies the update that drops them.
#pragma once

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/core/teardown.hpp"
#include "cudyn/detail/import_ticket.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/record_access.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include <cuda.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cudyn {

// One physical chunk of a shared range. Move-only: it owns its descriptor.
struct RangeChunk {
    std::uint64_t offset_bytes = 0;  // in the range
    std::uint64_t size_bytes = 0;
    Location location = Location::device(0);    // where its memory lives
    HandleType handle_type = HandleType::None;  // PosixFileDescriptor or Fabric
    FileDescriptor fd;                          // with PosixFileDescriptor
    FabricHandle fabric;                        // with Fabric

    // The same chunk with a file descriptor of its own (duplicated).
    Result<RangeChunk> duplicate() const;
};

// A range's whole layout (base_generation 0), or an update of it: what an
// importer needs to rebuild or follow the range.
struct RangeDescriptor {
    detail::ExporterIdentity exporter;  // the process that exported the range
    std::uint64_t range_id = 0;         // the exporter's range address: which range an update is for
    std::uint64_t reserved_bytes = 0;   // the whole reservation, mapped or not
    std::uint64_t alignment_bytes = 0;  // of the reservation; every chunk offset and size is a multiple of it
    std::uint64_t generation = 0;       // 1 for the first layout, one more for each update
    std::uint64_t base_generation = 0;  // an update applies to this generation only; 0: a whole layout
    std::uint64_t kept_chunks = 0;      // an update: the chunks the importer keeps (a whole layout: 0)
    std::vector<RangeChunk> chunks;     // the chunks after the kept ones, in address order

    bool is_update() const noexcept { return base_generation != 0; }
    // The same descriptor with descriptors of its own (each chunk's file
    // descriptor duplicated): to import it again, or to keep a copy while
    // the original is consumed.
    Result<RangeDescriptor> duplicate() const;
    // Bytes the chunks listed here cover.
    std::uint64_t listed_bytes() const noexcept;
    // The checks an importer makes before any driver call, InvalidArgument
    // naming the first failure: no exporter or range, a reserved size or
    // alignment of 0, an alignment that is not a power of two, a generation
    // that does not follow base_generation, kept chunks in a whole layout,
    // chunks that do not follow each other without gaps or overlaps (the
    // first at offset 0 in a whole layout), that are empty, wrap, run past
    // the reservation or are not multiples of the alignment, a location that
    // is not valid, a handle type other than one of the two, a POSIX chunk
    // without its descriptor.
    Result<void> validate() const;
};

// Follows one range of this process: its chunks as last published, and the
// generation. Holds no driver reference of its own (a chunk's memory is the
// range owner's); each call asks the driver what is mapped now.
class RangeExporter {
public:
    // The range of `buffer` (its reservation is the range; its chunks are the
    // mapped prefix), as generation 1. NotSupported for memory created
    // without a shareable handle type, and where this driver cannot say
    // where mappings lie (before CUDA 11.7); InvalidArgument for an empty buffer.
    static Result<RangeExporter> create(const GrowableBuffer& buffer);
    // The reservation `address` lies in, found by asking the driver (the
    // pointer's RANGE_START_ADDR / RANGE_SIZE, then the mappings from the
    // start), as generation 1; its alignment is the first chunk's
    // granularity. InvalidArgument for a null address or one that is not
    // mapped VMM memory.
    static Result<RangeExporter> create(CUdeviceptr address);

    RangeExporter() noexcept = default;  // empty

    // The whole layout of generation(), every chunk exported again (new
    // descriptors each call): what was published, not what is mapped now, so
    // a late importer joins at the generation the others hold and applies
    // the next update() as they do. Chunks mapped since (a growth) are not
    // in it; they come with that update. InvalidArgument when a published
    // chunk is no longer mapped where it was (a shrink or a release since):
    // take an update() first.
    Result<RangeDescriptor> describe() const;
    // What changed since generation(): the chunks that stay from the start,
    // then every chunk after them exported, as generation() + 1. A failure
    // changes nothing (a retry compares with the same generation).
    Result<RangeDescriptor> update();

    std::uint64_t generation() const noexcept { return generation_; }
    std::size_t chunk_count() const noexcept { return published_.size(); }
    std::uint64_t size_bytes() const noexcept;  // published bytes
    CUdeviceptr device_address() const noexcept { return base_; }
    std::size_t reserved_bytes() const noexcept { return reserved_; }
    bool empty() const noexcept { return base_ == 0; }

    // One mapped chunk as the driver reported it.
    struct Chunk {
        std::uint64_t offset = 0;
        std::uint64_t size = 0;
        CUmemGenericAllocationHandle handle = 0;  // tells a chunk from a new one at the same place
    };

private:
    RangeExporter(CUdeviceptr base, std::size_t reserved, std::size_t alignment, std::vector<Chunk> chunks) noexcept
        : base_(base), reserved_(reserved), alignment_(alignment), published_(std::move(chunks)) {}
    // `chunks` exported from index `first` on, in a descriptor of this range.
    Result<RangeDescriptor> exported(const std::vector<Chunk>& chunks, std::size_t first) const;

    CUdeviceptr base_ = 0;
    std::size_t reserved_ = 0;
    std::size_t alignment_ = 0;
    std::uint64_t generation_ = 1;
    std::vector<Chunk> published_;
};

// The tag of the channel messages send_descriptor() writes for a range.
inline constexpr std::uint32_t kRangeMessageTag = 0x43555247;  // "CURG"

// One message per FdChannel::kMaxDescriptors chunks (each chunk's descriptor
// riding along), sent in order. validate() first: nothing is sent for a
// descriptor that fails it.
Result<void> send_descriptor(FdChannel& channel, const RangeDescriptor& descriptor,
                             std::chrono::milliseconds timeout = kDefaultChannelTimeout);
// The other side: every message of one descriptor, or nothing (whatever came
// is closed). InvalidArgument for messages of another tag, records that fail
// their checks or disagree with each other, descriptors missing or extra,
// and validate().
Result<RangeDescriptor> receive_range(FdChannel& channel,
                                      std::chrono::milliseconds timeout = kDefaultChannelTimeout);

class ImportedRange;

// Reserves a range of descriptor.reserved_bytes here, imports and maps every
// chunk at its offset, and sets access for `access` over them in one call
// (empty: read-write for the current context's device, device 0 when none
// is current). The descriptor's descriptors are consumed (closed when this
// returns). InvalidArgument, before any driver call, for an update, a
// descriptor failing validate(), one this process exported, and grants that
// are not valid (a device that cannot reach a chunk's memory: NotSupported
// naming the pair). A failure half-way unmaps and releases what was mapped
// and frees the range.
Result<ImportedRange> import_range(RangeDescriptor descriptor, std::vector<AccessGrant> access = {});

// A range imported whole; unmapped, released and freed by close() or the
// destructor, after waiting for the devices it was granted to (as teardown()
// says): the chunks last first, then the reservation.
//
// It keeps a duplicate of each chunk's descriptor (a fabric chunk: its
// handle) while it lives, one open descriptor per POSIX chunk, so that
// suspend() / resume() can give the chunks back for a checkpoint of this
// process and map them again at the same addresses.
class ImportedRange {
public:
    ImportedRange() noexcept = default;  // empty; move-only

    // Applies an update: InvalidArgument, before any driver call, for a
    // whole layout, an update for another range (exporter or range id), one
    // that does not follow this generation (stale or out of order), keeps
    // more chunks than are mapped, or fails validate(). The new chunks are
    // imported first: a failure there changes nothing. Chunks past the kept
    // ones are then unmapped (after the wait), the new ones mapped and
    // granted the import's access in one call. A failure after the unmap
    // leaves the kept chunks mapped and the generation as it was: import the
    // exporter's describe() again to recover.
    Result<void> apply(RangeDescriptor update);

    CUdeviceptr device_address() const noexcept { return held_->range.device_address(); }
    std::size_t reserved_bytes() const noexcept { return held_->range.size_bytes(); }
    std::size_t size_bytes() const noexcept;  // mapped
    std::size_t chunk_count() const noexcept { return held_->chunks.size(); }
    std::uint64_t generation() const noexcept { return held_->generation; }
    // The mapped bytes (every byte view is valid); take a new span after an update.
    DeviceSpan<std::byte> device_span() const noexcept { return DeviceSpan<std::byte>(device_address(), size_bytes()); }
    template <typename T>
    Result<DeviceSpan<T>> device_span_as() const {
        return DeviceSpan<T>::from_bytes(device_address(), size_bytes());
    }
    const std::vector<AccessGrant>& access() const noexcept { return held_->access; }
    bool empty() const noexcept { return held_.empty(); }
    void set_teardown(Teardown teardown) noexcept { held_->teardown = teardown; }
    Teardown teardown() const noexcept { return held_->teardown; }

    // Closes now and reports the first refusal; what the driver still holds
    // stays held (retry). ok() when empty.
    Result<void> close() { return held_.release(); }

    // Before a checkpoint of this process (CheckpointPreparation does it for
    // a set of imports): waits for the devices granted (as teardown() says),
    // unmaps every chunk and lets go of its imported memory, and keeps the
    // reservation, the chunks' descriptors and the grants. While suspended
    // the range is reserved but nothing is mapped (size_bytes() is 0), and
    // it is not listed in live_imports(). InvalidArgument when empty or
    // already suspended. A refusal half-way maps the unmapped chunks again
    // (the range as it was); when that fails too it says so and stays
    // suspended, for resume() to finish.
    Result<void> suspend();
    // Imports every chunk again from its kept descriptor and maps it at the
    // same offset, then grants the import's access over them in one call:
    // the same device addresses, and the exporter's bytes (the exporter owns
    // the memory; a checkpoint of this process does not touch it).
    // InvalidArgument when not suspended; a refusal unmaps what this call
    // mapped and leaves the range suspended (retry).
    Result<void> resume();
    bool suspended() const noexcept { return held_->suspended; }

private:
    friend Result<ImportedRange> import_range(RangeDescriptor descriptor, std::vector<AccessGrant> access);
    // Dropped unreleased, members go last to first: the chunks before the
    // range they are mapped in.
    struct Held {
        AddressRange range;
        std::vector<MappedRange> chunks;
        // Each chunk's descriptor, duplicated at its import: kept[i] imports
        // chunks[i] again. chunks is a prefix of kept (all of it unless suspended).
        std::vector<RangeChunk> kept;
        std::vector<AccessGrant> access;
        detail::ExporterIdentity exporter;
        std::uint64_t range_id = 0;
        std::uint64_t generation = 0;
        detail::OwnerContext context;  // current at the import: waited for before unmapping
        Teardown teardown = Teardown::WaitForDevice;
        bool suspended = false;
        detail::ImportTicket listed;  // in live_imports() while not suspended

        bool empty() const noexcept { return range.empty() && chunks.empty(); }
        // Imports and maps kept[chunks.size()...] again, access included;
        // a failure unmaps what this call mapped.
        Result<void> remap_kept(const char* operation);
        void list() noexcept;
        // Maps `memory` after the chunks held, at the offsets of `chunks`,
        // then grants `access` over them in one call. A failure unmaps what
        // this call mapped; the chunks before stay.
        Result<void> map_chunks(const std::vector<RangeChunk>& chunks, const std::vector<PhysicalMemory>& memory);
        // Unmaps down to `count` chunks, last first, after one wait.
        Result<void> unmap_to(std::size_t count);
        Result<void> release();
    };
    explicit ImportedRange(Held held) noexcept : held_(std::move(held)) {}
    detail::UniqueHandle<Held> held_;
};

}  // namespace cudyn
