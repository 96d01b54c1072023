// cudyn — an NCCL communicator as an owner, and the two collectives cudyn's
// memory is most often moved with (all-reduce, broadcast). NCCL is opened at
// first use (nccl_library.hpp); without it every call here answers its load
// error. The communicator is shared with every registration made on it
// (registered_memory.hpp), so NCCL's communicator is destroyed only after the
// last registration is deregistered, whatever order the program lets go in.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/memory/device_span.hpp"

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace cudyn {

namespace detail {
struct NcclCommState;  // src/nccl/internal.hpp

// ncclDataType_t of T (its nccl.h values; checked against nccl.h where the build has it).
template <typename T>
constexpr int nccl_data_type() noexcept {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, std::int8_t> || std::is_same_v<U, char>) return 0;
    else if constexpr (std::is_same_v<U, std::uint8_t> || std::is_same_v<U, std::byte>) return 1;
    else if constexpr (std::is_same_v<U, std::int32_t>) return 2;
    else if constexpr (std::is_same_v<U, std::uint32_t>) return 3;
    else if constexpr (std::is_same_v<U, std::int64_t>) return 4;
    else if constexpr (std::is_same_v<U, std::uint64_t>) return 5;
    else if constexpr (std::is_same_v<U, float>) return 7;
    else if constexpr (std::is_same_v<U, double>) return 8;
    else return -1;
}
}  // namespace detail

// The 128 bytes one rank makes (ncclGetUniqueId) and every rank of the
// communicator passes to NcclCommunicator::init_rank. It travels as plain
// bytes: over an FdChannel (nccl_channel.hpp) or MPI.
struct NcclUniqueId {
    static constexpr std::size_t kBytes = 128;
    std::array<unsigned char, kBytes> bytes{};

    static Result<NcclUniqueId> create();  // ncclGetUniqueId
};

enum class NcclReduction { Sum, Product, Max, Min, Average };

class NcclCommunicator {
public:
    // ncclCommInitRank for `rank` of `rank_count`, on the device of the
    // calling thread's current context (as NCCL takes the runtime's current
    // device). Blocks until every rank has joined. InvalidArgument for a rank
    // count below 1 or a rank outside [0, rank_count), before NCCL is asked.
    static Result<NcclCommunicator> init_rank(const NcclUniqueId& id, int rank_count, int rank);

    NcclCommunicator() noexcept = default;  // empty; move-only
    NcclCommunicator(NcclCommunicator&&) noexcept = default;
    NcclCommunicator& operator=(NcclCommunicator&&) noexcept = default;
    NcclCommunicator(const NcclCommunicator&) = delete;
    NcclCommunicator& operator=(const NcclCommunicator&) = delete;
    // Lets go of this owner's share; the communicator is destroyed with the last share.
    ~NcclCommunicator() = default;

    bool empty() const noexcept { return state_ == nullptr; }
    int rank() const noexcept;
    int rank_count() const noexcept;
    // NCCL's ncclComm_t, for calls cudyn does not wrap.
    void* native_handle() const noexcept;

    // ncclCommFinalize: flushes the communicator's pending work (every rank
    // calls it). Afterwards only the destruction is left to do.
    Result<void> finalize();
    // Gives this owner's share back now: ncclCommDestroy's answer when it was
    // the last; ok() when registrations still hold the communicator (it is
    // destroyed with the last of them) or when empty.
    Result<void> destroy();

    // ncclAllReduce of send into receive (the same element count; the same
    // span for in-place). Without a stream: on the legacy default stream,
    // done when it returns; with one: enqueued there.
    template <typename T>
    Result<void> all_reduce(DeviceSpan<const T> send, DeviceSpan<T> receive, NcclReduction reduction) {
        return all_reduce_bytes(send.device_address(), send.size(), receive.device_address(), receive.size(),
                                checked_type<T>(), reduction, nullptr, true);
    }
    template <typename T>
    Result<void> all_reduce(DeviceSpan<const T> send, DeviceSpan<T> receive, NcclReduction reduction,
                            StreamRef stream) {
        return all_reduce_bytes(send.device_address(), send.size(), receive.device_address(), receive.size(),
                                checked_type<T>(), reduction, stream.handle(), false);
    }
    // ncclBroadcast in place: root's elements land in every rank's `buffer`
    // (the same element count on every rank).
    template <typename T>
    Result<void> broadcast(DeviceSpan<T> buffer, int root) {
        return broadcast_bytes(buffer.device_address(), buffer.size(), checked_type<T>(), root, nullptr, true);
    }
    template <typename T>
    Result<void> broadcast(DeviceSpan<T> buffer, int root, StreamRef stream) {
        return broadcast_bytes(buffer.device_address(), buffer.size(), checked_type<T>(), root, stream.handle(),
                               false);
    }

    // The shared state, for registrations (not API).
    const std::shared_ptr<detail::NcclCommState>& state() const noexcept { return state_; }

private:
    template <typename T>
    static constexpr int checked_type() noexcept {
        static_assert(detail::nccl_data_type<T>() >= 0,
                      "NCCL collectives take 8/32/64-bit integers, float or double elements");
        return detail::nccl_data_type<T>();
    }
    Result<void> all_reduce_bytes(CUdeviceptr send, std::size_t send_count, CUdeviceptr receive,
                                  std::size_t receive_count, int type, NcclReduction reduction, CUstream stream,
                                  bool wait);
    Result<void> broadcast_bytes(CUdeviceptr buffer, std::size_t count, int type, int root, CUstream stream,
                                 bool wait);

    explicit NcclCommunicator(std::shared_ptr<detail::NcclCommState> state) noexcept : state_(std::move(state)) {}
    std::shared_ptr<detail::NcclCommState> state_;
};

}  // namespace cudyn
