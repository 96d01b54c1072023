// cudyn — what every typed buffer shares: ownership of one driver allocation
// (move-only, released once, silently in the destructor) and the typed faces
// over it. DeviceBuffer, PinnedBuffer, ZeroCopyBuffer, ManagedBuffer and
// HostRegistration are thin layers over this; they differ in which entry
// allocates and which releases.
#pragma once

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/ledger_ticket.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/detail/unique_handle.hpp"
#include "cudyn/memory/host_span.hpp"

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
// while it is released: owner_context.hpp). Empty after a move or release().
//
// Releasing adds no synchronization of its own: cuMemFree, cuMemFreeHost and
// cuMemHostUnregister wait for the work of the context before they release.
class OwnedMemory {
public:
    OwnedMemory() noexcept = default;  // empty; move-only, released (silently) on destruction
    // Counted in the memory ledger as `kind` from now until released.
    OwnedMemory(std::uintptr_t address, CUdeviceptr device_address, std::size_t bytes, ReleaseFunction release,
                OwnerContext context, MemoryKind kind) noexcept
        : held_(Held{address, device_address, bytes, release, std::move(context), {}}) {
        held_->ledger = ledger_open(kind, held_->context.empty() ? -1 : held_->context.device(), bytes, address);
    }

    std::uintptr_t address() const noexcept { return held_->address; }
    CUdeviceptr device_address() const noexcept { return held_->device_address; }
    std::size_t bytes() const noexcept { return held_->bytes; }
    bool empty() const noexcept { return held_.empty(); }
    // The context the memory was allocated in (null when none was current).
    CUcontext context() const noexcept { return held_->context.handle(); }
    // Records where the device sees the allocation, when that is learned after
    // allocating (mapped host memory).
    void set_device_address(CUdeviceptr device_address) noexcept { held_->device_address = device_address; }

    // Releases now, in the memory's own context, and reports the driver's
    // answer: empty afterwards on success; on failure still the owner,
    // unchanged, so that a retry works (nothing is forgotten while the driver
    // still holds it). ok() when already empty.
    Result<void> release() { return held_.release(); }
    // InvalidArgument "<operation>: the <owner> is empty (moved from or freed)".
    Result<void> require(const char* operation, const char* owner) const;

private:
    struct Held {
        std::uintptr_t address = 0;
        CUdeviceptr device_address = 0;
        std::size_t bytes = 0;
        ReleaseFunction give_back = nullptr;  // null: empty
        OwnerContext context;
        LedgerTicket ledger;

        bool empty() const noexcept { return give_back == nullptr; }
        // give_back(address) in the memory's context; all or nothing.
        Result<void> release();
    };
    UniqueHandle<Held> held_;
};

// A typed buffer from an allocation's Result: its error, or make(memory).
// (`make` is a lambda inside the buffer's allocate(), which may reach the
// buffer's private adopting constructor.)
template <typename Buffer, typename Make>
Result<Buffer> adopt(Result<OwnedMemory> memory, Make make) {
    if (!memory) return std::move(memory).error();
    return make(std::move(*memory));  // no local in between: one move of the owner fewer
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
