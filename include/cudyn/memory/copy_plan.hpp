// cudyn — CopyPlan: many copies, in any direction, checked when added and
// issued together on a stream: one cuMemcpyBatchAsync where the driver has
// it (the 13.0 ABI preferred, else 12.8's) and the stream is not the legacy
// default stream, which the batch entry refuses; otherwise one cuMemcpyAsync
// per copy, in the order added. The path is chosen before any call, and
// execute() says which one ran. 2D and 3D copies (add_3d) go the same way
// through cuMemcpy3DBatchAsync or cuMemcpy3DAsync.
//
// The copies of a plan run in no particular order, so add() refuses a copy
// whose destination overlaps its own source or any other copy's source or
// destination (judged by address in the unified address space), and empty,
// mismatched, overflowing or wrapping ranges, before any driver call. Ranges
// past the end of an allocation cannot be seen from an address and are the
// driver's to refuse. Executing an empty plan is InvalidArgument.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/copy_3d.hpp"
#include "cudyn/memory/copy_options.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/host_span.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <type_traits>
#include <vector>

namespace cudyn {

// When a copy may read its source, relative to the stream it is issued on
// (CUmemcpySrcAccessOrder). The destination is always written in stream order.
enum class SourceAccessOrder {
    // In stream order, after the work enqueued before: the safe default.
    Stream,
    // During the execute() call, out of stream order: execute() returns once
    // every source has been read, so the caller may reuse or free the sources
    // then (a stack buffer, say). The caller promises that no earlier work on
    // the stream uses them. cudyn waits for the stream before returning, on
    // every path: cuMemcpyAsync reads in stream order, and the batch reads
    // the tail of a large pageable source after it returns.
    DuringCall,
    // Whenever the driver likes, out of stream order, also after execute()
    // returns: the sources must stay untouched until the stream reaches the
    // copies, and no earlier work on the stream may use them.
    Any,
};

class CopyPlan {
    // Keeps a parameter out of template deduction (C++20's std::type_identity_t).
    template <typename T>
    struct Identity {
        using type = T;
    };
    template <typename T>
    using Same = typename Identity<T>::type;
    template <typename T>
    using IfWritable = std::enable_if_t<!std::is_const_v<T>, int>;

public:
    // How execute() issued the copies.
    enum class Path {
        Batch13000,  // one cuMemcpyBatchAsync, CUDA 13.0's ABI (cuMemcpyBatchAsync_v2)
        Batch12080,  // one cuMemcpyBatchAsync, CUDA 12.8's ABI (reports the copy it refused)
        PerCopy,     // one cuMemcpyAsync per copy, in the order added
    };

    CopyPlan() = default;
    explicit CopyPlan(SourceAccessOrder order) noexcept : order_(order) {}

    // Device -> device: all of `source` into `destination` (the same number of
    // elements).
    template <typename T, IfWritable<T> = 0>
    Result<void> add(DeviceSpan<T> destination, Same<DeviceSpan<const T>> source) {
        return add_copy({destination.device_address(), destination.size(), false},
                        {source.device_address(), source.size(), false}, sizeof(T));
    }
    // Host -> device, from pinned or pageable memory.
    template <typename T, IfWritable<T> = 0>
    Result<void> add(DeviceSpan<T> destination, Same<HostSpan<const T>> source) {
        return add_copy({destination.device_address(), destination.size(), false},
                        {host_address(source.data()), source.size(), true}, sizeof(T));
    }
    // Device -> host, into pinned or pageable memory.
    template <typename T>
    Result<void> add(Same<HostSpan<std::remove_const_t<T>>> destination, DeviceSpan<T> source) {
        return add_copy({host_address(destination.data()), destination.size(), true},
                        {source.device_address(), source.size(), false}, sizeof(T));
    }
    // Host -> host (pinned or pageable, either side).
    template <typename T, IfWritable<T> = 0>
    Result<void> add(HostSpan<T> destination, Same<HostSpan<const T>> source) {
        static_assert(std::is_trivially_copyable_v<T>, "copies move trivially copyable elements (as bytes)");
        return add_copy({host_address(destination.data()), destination.size(), true},
                        {host_address(source.data()), source.size(), true}, sizeof(T));
    }
    // `bytes` from `source` to `destination`: any addresses of the unified
    // address space (device, managed, mapped, VMM, pinned or pageable host
    // memory; a host pointer as reinterpret_cast<CUdeviceptr>(pointer)).
    Result<void> add_bytes(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes);
    // The same, with this copy's own options instead of the plan's.
    Result<void> add_bytes(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes,
                           const CopyOptions& options);

    // A 2D or 3D copy between pitched spans (copy_3d.hpp's checks, and the
    // dependency check row by row). Issued by cuMemcpy3DBatchAsync in the
    // ABI of the plan's path where the driver has that entry, else by one
    // cuMemcpy3DAsync per 3D copy; the plan's source order applies.
    Result<void> add_3d(const PitchedCopy& copy);
    Result<void> add_3d(const PitchedCopy& copy, const CopyOptions& options);

    // The options of every copy added without its own (none by default).
    // A negative location id is InvalidArgument, leaving the plan's as they were.
    Result<void> set_options(const CopyOptions& options);
    const CopyOptions& options() const noexcept { return options_; }

    // Copies of both kinds; they share one numbering, in the order added.
    std::size_t size() const noexcept { return sizes_.size() + ops_3d_.size(); }
    bool empty() const noexcept { return size() == 0; }
    void clear() noexcept;
    void reserve(std::size_t copies);

    SourceAccessOrder source_order() const noexcept { return order_; }
    void set_source_order(SourceAccessOrder order) noexcept;

    // The path execute(stream) takes on this driver: decided from the entries
    // the driver has and the stream alone, before any call.
    static Path path_for(StreamRef stream) noexcept;

    // Issues every copy on `stream` and returns the path it took. A batch is
    // one call: refused, nothing of it is queued, and the error names the
    // copy where the driver says which (the 12.8 ABI); the 13.0 ABI does not
    // say, and the error says so. Per copy, a failure part-way names the
    // failing copy and how many before it were issued (issued copies cannot
    // be taken back).
    Result<Path> execute(StreamRef stream) const;
    // Synchronous: on the legacy default stream (one call per copy: the batch
    // entry refuses that stream), returning once every copy is done.
    Result<Path> execute() const;
    // Issues on `stream` by `path`, whatever path_for() would choose: for
    // tests and benchmarks that compare the paths. NotSupported when the
    // driver lacks the path's entry, InvalidArgument for a batch on the
    // legacy default stream (the driver refuses it).
    Result<Path> execute_via(Path path, StreamRef stream) const;

private:
    struct Side {
        CUdeviceptr address;  // a device address, or a host pointer's value
        std::size_t count;    // elements
        bool host;            // named so in errors
    };
    template <typename T>
    static CUdeviceptr host_address(T* pointer) noexcept {
        return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pointer));
    }
    // A range of bytes, both ends included (for the dependency check).
    struct Interval {
        CUdeviceptr first;
        CUdeviceptr last;
    };
    // The rows a box of a pitched copy touches; rows that follow one another
    // without a gap are one interval.
    static std::vector<Interval> box_rows(const PitchedSpan& span, const Offset3D& offset, const Extent3D& extent);
    Result<void> add_copy(Side destination, Side source, std::size_t element_size);
    Result<void> check_dependencies(std::size_t index, const std::vector<Interval>& written,
                                    const std::vector<Interval>& read) const;
    void record(std::size_t index, const std::vector<Interval>& written, const std::vector<Interval>& read);
    Result<void> run_1d(Path path, StreamRef stream) const;
    // Which options copy `index` of its kind has: 0 the plan's, k + 1 own_options_[k].
    std::size_t options_index(const CopyOptions& options);
    const CopyOptions& options_of(std::size_t index) const noexcept {
        return index == 0 ? options_ : own_options_[index - 1];
    }
    Result<void> check_options() const;  // before execute's first call
    bool uses_options() const noexcept { return options_.any() || !own_options_.empty(); }
    Result<void> run_3d(Path path, StreamRef stream) const;
    Result<void> add_range(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes);
    Result<Path> run(Path path, StreamRef stream, bool wait_for_sources) const;

    SourceAccessOrder order_ = SourceAccessOrder::Stream;
    // The copies, laid out as the batch entry takes them.
    std::vector<CUdeviceptr> destinations_;
    std::vector<CUdeviceptr> sources_;
    std::vector<std::size_t> sizes_;
    // The 2D/3D copies, as added and as the batch entry takes them.
    std::vector<PitchedCopy> copies_3d_;
    std::vector<CUDA_MEMCPY3D_BATCH_OP> ops_3d_;
    // Copy options: the plan's, the distinct sets copies brought, and which
    // each copy has (empty while every 1D copy has the plan's).
    CopyOptions options_;
    std::vector<CopyOptions> own_options_;
    std::vector<std::size_t> options_1d_;
    std::vector<std::size_t> options_3d_;
    // Every destination so far (start -> end, copy index; they never overlap)
    // and the union of the sources (start -> end), for the dependency check.
    struct Written {
        CUdeviceptr end;
        std::size_t copy;
    };
    std::map<CUdeviceptr, Written> written_;
    std::map<CUdeviceptr, CUdeviceptr> read_;
};

// "batch (13.0 ABI)", "batch (12.8 ABI)", "per copy".
const char* to_string(CopyPlan::Path path) noexcept;

}  // namespace cudyn
