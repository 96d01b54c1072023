// cudyn — StreamOrderedBuffer<T>: device memory allocated on a stream from a
// memory pool (cuMemAllocFromPoolAsync / cuMemAllocAsync) and freed in stream
// order (cuMemFreeAsync), typed and move-only. The free goes on the stream the
// buffer was last used on: every transfer given a stream records it, use_on()
// records work the program enqueues itself (kernels), and that stream must
// still exist when the buffer is freed.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/host_span.hpp"
#include "cudyn/memory/owned_memory.hpp"
#include "cudyn/pool/memory_pool.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace cudyn {

namespace detail {

// One stream-ordered allocation: its address and size, the stream its free
// goes on, and the context it was allocated in. Empty after a move or a free.
class StreamOrderedMemory {
public:
    StreamOrderedMemory() noexcept {}  // user-provided: see Held()
    StreamOrderedMemory(StreamOrderedMemory&&) noexcept = default;
    StreamOrderedMemory& operator=(StreamOrderedMemory&&) noexcept = default;
    // The common free (see release()) in the caller's code; any other case
    // is the record's own release, and a refusal lets go of the memory.
    ~StreamOrderedMemory() {
        CUresult answer = CUDA_SUCCESS;
        if (CUDYN_DETAIL_UNLIKELY(free_on_created_stream(answer) && answer != CUDA_SUCCESS)) held_.let_go();
    }

    // `count` * `element_size` bytes on `stream`, from `pool` (null: the
    // current pool of the stream's device, cuMemAllocAsync), recorded in
    // `into`, which must be empty (and is left without memory on failure).
    // Filled in place rather than returned: the hot path's one record goes
    // to the caller without a move. A created Stream keeps the context
    // alive for it (no retain of its own); on any other stream the calling
    // thread's current context is retained.
    //
    // The hottest case (a live pool, a created Stream, the entry there, a
    // count that fits) is served here, in the caller's code, the ledger
    // entry included: between the driver's calls there is then no call into
    // the library, no Result handed back through memory, and none of the
    // library's instruction lines to fetch again after a driver call has
    // emptied the caches. Every other case, and every refusal, goes out of
    // line (allocate_checked), with the checks in the order that decides
    // the error.
    static Result<void> allocate(StreamOrderedMemory& into, std::size_t count, std::size_t element_size,
                                 const MemoryPool* pool, StreamRef stream) {
        const DriverTable* table = usable_table.load(std::memory_order_acquire);
        std::size_t bytes = 0;
        if (CUDYN_DETAIL_UNLIKELY(pool == nullptr || pool->empty() || stream.context() == nullptr ||
                                  stream.is_default() || table == nullptr ||
                                  table->cuMemAllocFromPoolAsync_v11020 == nullptr || count == 0 ||
                                  multiply_overflows(count, element_size, &bytes)))
            return allocate_checked(into, count, element_size, pool, stream);
        // No context query or switch: see allocate_checked.
        CUdeviceptr address = 0;
        if (const CUresult result =
                table->cuMemAllocFromPoolAsync_v11020(&address, bytes, pool->handle(), stream.handle());
            CUDYN_DETAIL_UNLIKELY(result != CUDA_SUCCESS))
            return allocation_refused(result, pool);
        record(into.held_.get(), address, bytes, pool, stream, *stream.context());
        return ok();
    }
    // The same, returned: the form the 0.2.0 header's inline allocate calls,
    // kept so that programs built against it still load and run.
    static Result<StreamOrderedMemory> allocate(std::size_t count, std::size_t element_size, const MemoryPool* pool,
                                                StreamRef stream);

    CUdeviceptr address() const noexcept { return held_->address; }
    std::size_t bytes() const noexcept { return held_->bytes; }
    CUstream stream() const noexcept { return held_->stream; }
    // Whether the memory lies at a host location (a pool at the host or a
    // host NUMA node): then its copies take the unified route (CopyRoute).
    CopyRoute copy_route() const noexcept { return held_->host_located ? CopyRoute::Unified : CopyRoute::Typed; }
    // stream() with the context its work runs in: the one a recorded
    // cudyn::Stream names, else the allocation's own. The no-stream forms run
    // there, whatever context the calling thread has.
    StreamRef stream_ref() const noexcept { return StreamRef(held_->stream, held_->stream_context); }
    bool empty() const noexcept { return held_.empty(); }
    void use_on(StreamRef stream) noexcept {
        if (empty()) return;
        held_->stream = stream.handle();
        held_->stream_context = stream.context_handle() != nullptr ? stream.context_handle() : held_->context;
    }
    // cuMemFreeAsync on stream(), in the allocation's context: empty
    // afterwards, or unchanged when the driver refused (retry). On a created
    // stream with the entry there (the common case) the table is called
    // here, as allocate does; any other case is the record's release.
    Result<void> release() {
        CUresult answer = CUDA_SUCCESS;
        if (CUDYN_DETAIL_UNLIKELY(!free_on_created_stream(answer))) return held_.release();
        if (CUDYN_DETAIL_UNLIKELY(answer != CUDA_SUCCESS)) return free_refused(answer);
        return ok();
    }
    // InvalidArgument "<operation>: the StreamOrderedBuffer is empty (moved from or freed)".
    Result<void> require(const char* operation) const;

private:
    struct Held {
        // User-provided (as are the constructors of the owners around it), so
        // that a new record (one per allocation, made in the caller's code)
        // sets its members one by one: value-initialising an object whose
        // default constructor is not user-provided clears the whole of it
        // first, which compilers emit as a string instruction that is slow
        // to start.
        Held() noexcept {}

        OwnerContext retained;    // the retain taken when no Stream keeps the context (declared first: goes last)
        CUdeviceptr address = 0;  // 0: empty
        std::size_t bytes = 0;
        CUstream stream = nullptr;
        CUcontext context = nullptr;  // the one it was allocated in, made current for a default-stream free
        CUcontext stream_context = nullptr;  // the context of `stream`'s work (see stream_ref())
        LedgerTicket ledger;
        bool host_located = false;  // from a pool at the host or a host NUMA node

        bool empty() const noexcept { return address == 0; }
        Result<void> release();  // cuMemFreeAsync on stream; the retain goes after the free
        Result<void> release_on_default();  // the same on a default stream: in the memory's context
        // Empty, as Held{} is, without a temporary record; the retain, if
        // any, goes last (after the free).
        void forget() noexcept {
            address = 0;
            bytes = 0;
            stream = nullptr;
            context = stream_context = nullptr;
            host_located = false;
            ledger.close();
            if (CUDYN_DETAIL_UNLIKELY(!retained.empty())) retained.reset();
        }
    };
    // allocate's checks in the order that decides the error, and every case
    // but the hottest.
    static Result<void> allocate_checked(StreamOrderedMemory& into, std::size_t count, std::size_t element_size,
                                         const MemoryPool* pool, StreamRef stream);
    // The driver's refusals as call_driver words them (built out of line).
    static Result<void> allocation_refused(CUresult result, const MemoryPool* pool);
    static Result<void> free_refused(CUresult result);
    // What a successful allocation records: the memory, its stream and
    // context, and its ledger entry.
    static void record(Held& held, CUdeviceptr address, std::size_t bytes, const MemoryPool* pool, StreamRef stream,
                       const OwnerContext& context) noexcept {
        held.address = address;
        held.bytes = bytes;
        held.stream = stream.handle();
        held.context = context.handle();
        held.stream_context = held.context;
        // Known from the pool, so its copies take the route the driver
        // accepts without a refused try first (the current pool is always
        // the device's).
        held.host_located = pool != nullptr && pool->location().kind() != LocationKind::Device;
        held.ledger.open(MemoryKind::StreamOrdered, context.empty() ? -1 : static_cast<int>(context.device()), bytes,
                         static_cast<std::uintptr_t>(address));
    }
    // The common free: on a created stream, whose work carries its own
    // context (no context query or switch, as for the allocation), with the
    // entry there. False when that is not the case; else true with the
    // driver's `answer`, the record emptied when that is CUDA_SUCCESS (and
    // unchanged otherwise). An empty record: true, CUDA_SUCCESS.
    bool free_on_created_stream(CUresult& answer) noexcept {
        Held& held = held_.get();
        if (held.empty()) return true;
        const DriverTable* table = usable_table.load(std::memory_order_acquire);
        if (CUDYN_DETAIL_UNLIKELY(StreamRef(held.stream).is_default() || table == nullptr ||
                                  table->cuMemFreeAsync_v11020 == nullptr))
            return false;
        answer = table->cuMemFreeAsync_v11020(held.address, held.stream);
        if (CUDYN_DETAIL_LIKELY(answer == CUDA_SUCCESS)) held.forget();
        return true;
    }

    UniqueHandle<Held> held_;
};

// Waits for `stream` after `issued` succeeded: the synchronous forms.
Result<void> finish_on_stream(Result<void> issued, CUstream stream);

}  // namespace detail

template <typename T>
class StreamOrderedBuffer {
    static_assert(std::is_trivially_copyable_v<T>, "buffers hold trivially copyable elements (copied as bytes)");
    static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>, "buffer elements are not cv-qualified");

public:
    using value_type = T;

    // `count` elements of uninitialised memory on `stream`, from the current
    // pool of the context's device (cuMemAllocAsync) or from `pool`. Needs a
    // current context. Before the driver is asked: InvalidArgument for a zero
    // or overflowing count or an empty pool, NotSupported for a driver
    // without the entries (before 11.2) or a device without
    // MEMORY_POOLS_SUPPORTED. On a created cudyn::Stream the buffer relies on
    // the stream to keep the context alive; on a default stream or a raw
    // handle it retains the current context itself.
    static Result<StreamOrderedBuffer> allocate(std::size_t count, StreamRef stream) {
        return allocate_from(nullptr, count, stream);
    }
    static Result<StreamOrderedBuffer> allocate(const MemoryPool& pool, std::size_t count, StreamRef stream) {
        return allocate_from(&pool, count, stream);
    }

    StreamOrderedBuffer() noexcept {}  // empty (user-provided, as detail::StreamOrderedMemory's Held() says why)

    std::size_t size() const noexcept { return memory_.bytes() / sizeof(T); }
    std::size_t size_bytes() const noexcept { return memory_.bytes(); }
    bool empty() const noexcept { return memory_.empty(); }
    // Where the device sees the first element (0 when empty).
    CUdeviceptr device_address() const noexcept { return memory_.address(); }
    // The whole buffer as a DeviceSpan (empty when the buffer is). Work done
    // through the view is not recorded: use_on() its stream.
    DeviceSpan<T> device_span() const noexcept { return DeviceSpan<T>(device_address(), size()); }
    // The stream the free will go on: the allocating one, or the last one
    // recorded since.
    CUstream stream() const noexcept { return memory_.stream(); }
    // Records that work on `stream` uses the buffer (a kernel the program
    // launched), so that the free follows it.
    void use_on(StreamRef stream) noexcept { memory_.use_on(stream); }

    // Transfers take an optional stream last. Without one they run on the
    // buffer's stream and return once it has done them (done means done, in
    // this memory's stream order); with one they are enqueued there and the
    // stream is recorded. Memory of a pool at the host or a host NUMA node
    // is copied by the unified cuMemcpy / cuMemcpyAsync: the driver refuses
    // the typed host copies of it.

    // Host -> device, the whole span to the first source.size() elements.
    Result<void> copy_from(HostSpan<const T> source) {
        CUDYN_TRY(live("StreamOrderedBuffer::copy_from"));
        return detail::finish_on_stream(copy_in(source, memory_.stream_ref()), stream());
    }
    Result<void> copy_from(HostSpan<const T> source, StreamRef stream) {
        CUDYN_TRY(live("StreamOrderedBuffer::copy_from"));
        use_on(stream);
        return copy_in(source, stream);
    }
    // Device -> host, the first destination.size() elements. Not const: it
    // records its stream, which the free must follow.
    Result<void> copy_to(HostSpan<T> destination) {
        CUDYN_TRY(live("StreamOrderedBuffer::copy_to"));
        return detail::finish_on_stream(copy_out(destination, memory_.stream_ref()), stream());
    }
    Result<void> copy_to(HostSpan<T> destination, StreamRef stream) {
        CUDYN_TRY(live("StreamOrderedBuffer::copy_to"));
        use_on(stream);
        return copy_out(destination, stream);
    }
    // Device -> device: all of `source` to the start of the buffer.
    Result<void> copy_from(DeviceSpan<const T> source) {
        CUDYN_TRY(live("StreamOrderedBuffer::copy_from"));
        return detail::finish_on_stream(copy_in(source, memory_.stream_ref()), stream());
    }
    Result<void> copy_from(DeviceSpan<const T> source, StreamRef stream) {
        CUDYN_TRY(live("StreamOrderedBuffer::copy_from"));
        use_on(stream);
        return copy_in(source, stream);
    }
    // Every byte set to `value`.
    Result<void> set_bytes(std::uint8_t value) {
        CUDYN_TRY(live("StreamOrderedBuffer::set_bytes"));
        return detail::finish_on_stream(set_in(value, memory_.stream_ref()), stream());
    }
    Result<void> set_bytes(std::uint8_t value, StreamRef stream) {
        CUDYN_TRY(live("StreamOrderedBuffer::set_bytes"));
        use_on(stream);
        return set_in(value, stream);
    }
    // Every element set to `value`, for 1-, 2- and 4-byte elements.
    template <typename U = T, std::enable_if_t<sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4, int> = 0>
    Result<void> fill(const T& value) {
        CUDYN_TRY(live("StreamOrderedBuffer::fill"));
        return detail::finish_on_stream(fill_in(value, memory_.stream_ref()), stream());
    }
    template <typename U = T, std::enable_if_t<sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4, int> = 0>
    Result<void> fill(const T& value, StreamRef stream) {
        CUDYN_TRY(live("StreamOrderedBuffer::fill"));
        use_on(stream);
        return fill_in(value, stream);
    }

    // Frees in stream order on stream() (or on `stream`), without waiting,
    // and reports the driver's answer: empty afterwards, or unchanged when the
    // driver refused (free() may be retried). The destructor does the same,
    // silently. The memory goes back to the pool when the stream reaches the
    // free: the next allocation on that stream may get the same address.
    Result<void> free() { return memory_.release(); }
    Result<void> free(StreamRef stream) {
        use_on(stream);
        return memory_.release();
    }

private:
    // The buffer is made where the caller's result lives and filled there
    // (one object returned on every path, so it is not moved either).
    static Result<StreamOrderedBuffer> allocate_from(const MemoryPool* pool, std::size_t count, StreamRef stream) {
        Result<StreamOrderedBuffer> made(std::in_place);
        Result<void> allocated = detail::StreamOrderedMemory::allocate(made->memory_, count, sizeof(T), pool, stream);
        if (!allocated) made = std::move(allocated).error();
        return made;
    }

    Result<void> live(const char* operation) const { return memory_.require(operation); }
    detail::DeviceExtent extent() const noexcept { return {device_address(), size(), sizeof(T)}; }
    Result<void> copy_in(HostSpan<const T> source, StreamRef stream) {
        return detail::copy_host_to_device("StreamOrderedBuffer::copy_from", extent(), 0, source.data(), source.size(),
                                           &stream, memory_.copy_route());
    }
    Result<void> copy_out(HostSpan<T> destination, StreamRef stream) {
        return detail::copy_device_to_host("StreamOrderedBuffer::copy_to", destination.data(), destination.size(),
                                           extent(), 0, &stream, memory_.copy_route());
    }
    Result<void> copy_in(DeviceSpan<const T> source, StreamRef stream) {
        return detail::copy_device_to_device("StreamOrderedBuffer::copy_from", extent(),
                                             {source.device_address(), source.size(), sizeof(T)}, &stream,
                                             memory_.copy_route());
    }
    Result<void> set_in(std::uint8_t value, StreamRef stream) {
        return detail::set_device_bytes("StreamOrderedBuffer::set_bytes", extent(), value, &stream);
    }
    Result<void> fill_in(const T& value, StreamRef stream) {
        return detail::fill_device("StreamOrderedBuffer::fill", extent(), value, &stream);
    }

    detail::StreamOrderedMemory memory_;
};

}  // namespace cudyn
