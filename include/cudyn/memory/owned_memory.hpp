// cudyn — what every typed buffer shares: ownership of one driver allocation
// (move-only, released once, silently in the destructor) and the size checks
// done before the driver is called.
//
// DeviceBuffer, PinnedBuffer, ZeroCopyBuffer, ManagedBuffer and HostRegistration
// are thin layers over this; their differences are which entry allocates and
// which releases.
#pragma once

#include "cudyn/memory/host_span.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace cudyn {

namespace detail {

// Gives back what `address` owns (cuMemFree_v2, cuMemFreeHost, cuMemHostUnregister, ...).
using ReleaseFunction = Result<void> (*)(std::uintptr_t address);

// One allocation: the address it was allocated at (host or device), the
// address the device sees it at (0 when it has none), its size, how to
// release it, and the context it was allocated in (kept alive, and current
// while it is released: owner_context.hpp). Empty after a move, free() or
// release().
//
// Releasing adds no synchronization of its own: cuMemFree, cuMemFreeHost and
// cuMemHostUnregister wait for the work of the context before they release
// (measured on an H100, driver 580: each returned only once a kernel still
// writing the memory from a non-blocking stream was done).
class OwnedMemory {
public:
    OwnedMemory() noexcept = default;  // empty; move-only, released (silently) on destruction
    OwnedMemory(std::uintptr_t address, CUdeviceptr device_address, std::size_t bytes, ReleaseFunction release,
                OwnerContext context) noexcept
        : owner_(Traits::State{address, device_address, bytes, release, std::move(context)}) {}

    std::uintptr_t address() const noexcept { return owner_.get().address; }
    CUdeviceptr device_address() const noexcept { return owner_.get().device_address; }
    std::size_t bytes() const noexcept { return owner_.get().bytes; }
    bool empty() const noexcept { return owner_.empty(); }
    // The context the memory was allocated in (null when none was current).
    CUcontext context() const noexcept { return owner_.get().context.handle(); }
    // Records where the device sees the allocation, when that is learned after
    // allocating (mapped host memory).
    void set_device_address(CUdeviceptr device_address) noexcept { owner_.get().device_address = device_address; }

    // Releases now, in the memory's own context, and reports the driver's
    // answer: empty afterwards on success; on failure still the owner,
    // unchanged, so that a retry works (nothing is forgotten while the driver
    // still holds it). ok() when already empty.
    Result<void> release() { return owner_.release(); }
    // InvalidArgument "<operation>: the <owner> is empty (moved from or freed)".
    Result<void> require(const char* operation, const char* owner) const;

private:
    struct Traits {
        struct State {
            std::uintptr_t address = 0;
            CUdeviceptr device_address = 0;
            std::size_t bytes = 0;
            ReleaseFunction release = nullptr;  // null: empty
            OwnerContext context;
        };
        static bool empty(const State& state) noexcept { return state.release == nullptr; }
        static Result<void> release(State& state) {
            CUDYN_TRY(state.context.release_into([&state] { return state.release(state.address); }));
            state = State{};
            return ok();
        }
    };
    UniqueHandle<Traits> owner_;
};

// The one place byte sizes are computed from element counts and address
// ranges are checked, before any driver call, in every module:
//
// count * element_size: InvalidArgument naming `what` when the product
// overflows size_t (a count of 0 is 0 bytes).
inline Result<std::size_t> byte_size(std::size_t count, std::size_t element_size, const char* what);
// The same, and InvalidArgument when count is zero.
inline Result<std::size_t> checked_bytes(std::size_t count, std::size_t element_size, const char* what);

// The refusals of the two above, out of line: the checks run inline on every
// allocation (a multiply with an overflow flag), the messages only on failure.
Error size_overflow_error(std::size_t count, std::size_t element_size, const char* what);
Error zero_count_error(const char* what);

inline bool multiply_overflows(std::size_t count, std::size_t element_size, std::size_t* bytes) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(count, element_size, bytes);
#else
    if (element_size != 0 && count > static_cast<std::size_t>(-1) / element_size) return true;
    *bytes = count * element_size;
    return false;
#endif
}

inline Result<std::size_t> byte_size(std::size_t count, std::size_t element_size, const char* what) {
    std::size_t bytes = 0;
    if (multiply_overflows(count, element_size, &bytes)) return size_overflow_error(count, element_size, what);
    return bytes;
}

inline Result<std::size_t> checked_bytes(std::size_t count, std::size_t element_size, const char* what) {
    if (count == 0) return zero_count_error(what);
    return byte_size(count, element_size, what);
}
// [address, address + bytes) inside the address space: InvalidArgument naming
// `what` when it runs past the end (wraps around). bytes 0 is fine anywhere.
Result<void> check_address_range(std::uint64_t address, std::size_t bytes, const char* what);

// [offset, offset + count) within [0, size), overflow-safe: InvalidArgument
// naming `what` (count 0 included: an empty range is a caller's mistake here).
Result<void> check_range(std::size_t offset, std::size_t count, std::size_t size, const char* what);

// A typed buffer from an allocation's Result: its error, or make(memory).
// (`make` is a lambda inside the buffer's allocate(), which may reach the
// buffer's private adopting constructor.)
template <typename Buffer, typename Make>
Result<Buffer> adopt(Result<OwnedMemory> memory, Make make) {
    if (!memory) return std::move(memory).error();
    return make(std::move(*memory));
}

// The typed face of an OwnedMemory: element count, move-only, free().
template <typename T>
class TypedMemory {
    static_assert(std::is_trivially_copyable_v<T>, "buffers hold trivially copyable elements (copied as bytes)");
    static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>, "buffer elements are not cv-qualified");

public:
    using value_type = T;

    std::size_t size() const noexcept { return memory_.bytes() / sizeof(T); }
    std::size_t size_bytes() const noexcept { return memory_.bytes(); }
    bool empty() const noexcept { return memory_.empty(); }
    // Gives the memory back now and reports the driver's answer; the buffer is
    // empty afterwards, or, when the driver refused, unchanged (free() may be
    // retried). The destructor does the same, silently.
    Result<void> free() { return memory_.release(); }

protected:
    TypedMemory() noexcept = default;
    explicit TypedMemory(OwnedMemory memory) noexcept : memory_(std::move(memory)) {}
    T* host_data() const noexcept { return reinterpret_cast<T*>(memory_.address()); }

    OwnedMemory memory_;
};

// TypedMemory whose allocation the host reads and writes directly (pinned,
// mapped and managed memory): element access and a HostSpan of it.
template <typename T>
class HostTypedMemory : public TypedMemory<T> {
public:
    // The host address (null when empty).
    T* data() const noexcept { return this->host_data(); }
    HostSpan<T> span() const noexcept { return HostSpan<T>(data(), this->size()); }
    T& operator[](std::size_t i) const noexcept { return data()[i]; }
    T* begin() const noexcept { return data(); }
    T* end() const noexcept { return data() + this->size(); }

protected:
    using TypedMemory<T>::TypedMemory;
};

}  // namespace detail

}  // namespace cudyn
