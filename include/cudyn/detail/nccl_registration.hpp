// cudyn — one NCCL registration (ncclCommRegister or a window), as the owner
// the registered-memory classes are built on. It holds a share of the
// communicator, so NCCL's communicator outlives it; it does not hold the
// memory, which is why only the classes that own the memory too create one.
//
// Internal: public only because those classes' templates hold one.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/unique_handle.hpp"

#include <cuda.h>

#include <cstddef>
#include <memory>

namespace cudyn {

// How memory is registered with a communicator: for NCCL's zero-copy paths
// (ncclCommRegister, NCCL 2.19+), or as a symmetric window that every rank
// registers together (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC,
// NCCL 2.27+; a collective call).
enum class NcclRegistrationKind { Buffer, SymmetricWindow };

namespace detail {

struct NcclCommState;

class NcclRegistration {
public:
    // Registers [address, address + bytes); errors begin with `operation`.
    static Result<NcclRegistration> create(const std::shared_ptr<NcclCommState>& communicator, CUdeviceptr address,
                                           std::size_t bytes, NcclRegistrationKind kind, const char* operation);

    NcclRegistration() noexcept = default;  // empty; move-only; deregisters silently on destruction

    // Deregisters now: ok() when empty; a refusal keeps the registration (retry).
    Result<void> deregister() { return held_.release(); }
    bool empty() const noexcept { return held_.empty(); }
    CUdeviceptr device_address() const noexcept { return held_->address; }
    std::size_t size_bytes() const noexcept { return held_->bytes; }

private:
    struct Held {
        std::shared_ptr<NcclCommState> communicator;
        void* handle = nullptr;  // ncclCommRegister's handle or the ncclWindow_t
        CUdeviceptr address = 0;
        std::size_t bytes = 0;
        NcclRegistrationKind kind = NcclRegistrationKind::Buffer;

        bool empty() const noexcept { return handle == nullptr; }
        Result<void> release();
    };
    explicit NcclRegistration(Held held) noexcept : held_(std::move(held)) {}
    UniqueHandle<Held> held_;
};

}  // namespace detail
}  // namespace cudyn
