// cudyn — memory registered with an NCCL communicator, owned together with
// the registration: the memory (any cudyn owner with device_address() and
// size_bytes(): DeviceBuffer, StreamOrderedBuffer, MappedRange, ...) is moved
// in, and the registration is always given back before it. A program cannot
// free registered memory behind NCCL's back, whatever order it lets go in:
// the memory is reachable only read-only here (its spans for collectives),
// and deregister() hands it back unregistered. A GrowableBuffer is
// registered with NcclRegisteredGrowableBuffer, which follows its growth.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/detail/nccl_registration.hpp"
#include "cudyn/nccl/communicator.hpp"

#include <type_traits>
#include <utility>

namespace cudyn {

class GrowableBuffer;

template <typename Owner>
class NcclRegisteredMemory {
    static_assert(!std::is_same_v<Owner, GrowableBuffer>,
                  "a GrowableBuffer is registered with NcclRegisteredGrowableBuffer, which follows its growth");

public:
    // Registers all of `memory` with `communicator` and takes it. On failure
    // the memory is released with the error (it was moved in). InvalidArgument
    // for empty memory or an empty communicator; NotSupported naming the entry
    // where the loaded NCCL lacks it (a window needs NCCL 2.27).
    static Result<NcclRegisteredMemory> create(const NcclCommunicator& communicator, Owner memory,
                                               NcclRegistrationKind kind = NcclRegistrationKind::Buffer) {
        CUDYN_TRY_ASSIGN(auto registration,
                         detail::NcclRegistration::create(communicator.state(), memory.device_address(),
                                                          memory.size_bytes(), kind, "NcclRegisteredMemory::create"));
        return NcclRegisteredMemory(std::move(memory), std::move(registration));
    }

    NcclRegisteredMemory() noexcept = default;  // empty; move-only
    NcclRegisteredMemory(NcclRegisteredMemory&&) noexcept = default;
    // This one's registration goes before its memory, then it takes the other's.
    NcclRegisteredMemory& operator=(NcclRegisteredMemory&& other) noexcept {
        if (this != &other) {
            registration_ = std::move(other.registration_);
            memory_ = std::move(other.memory_);
        }
        return *this;
    }

    const Owner& memory() const noexcept { return memory_; }
    bool registered() const noexcept { return !registration_.empty(); }

    // Deregisters and hands the memory back. A refused deregistration keeps
    // both (retry); the memory is never handed back registered.
    Result<Owner> deregister() {
        CUDYN_TRY(registration_.deregister());
        return std::move(memory_);
    }

private:
    NcclRegisteredMemory(Owner memory, detail::NcclRegistration registration) noexcept
        : memory_(std::move(memory)), registration_(std::move(registration)) {}

    // Members go last to first: the registration before the memory.
    Owner memory_;
    detail::NcclRegistration registration_;
};

}  // namespace cudyn
