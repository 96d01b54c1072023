// cudyn — stream memory operations: a stream writes a 32- or 64-bit value to
// memory, or waits until a value in memory meets a condition, in stream
// order, without a kernel (cuStreamWriteValue32/64, cuStreamWaitValue32/64,
// cuStreamBatchMemOp). They are GPU-side flags and doorbells: a stream waits
// for a word that the host, another stream or another process writes.
//
//     CUDYN_TRY(cudyn::wait_value32(flag.device_address(), 1, cudyn::WaitCondition::Equal, stream));
//     // ... work on `stream` runs once the host has stored 1 in the flag
//
// The address is a device address of device memory, of pinned or registered
// host memory (its device address: ZeroCopyBuffer::device_address(),
// HostRegistration), of a VMM mapping or of IPC-opened memory; never managed
// memory, and never memory of a memory pool (StreamOrderedBuffer, the default
// pool's or a created pool's), which the driver refuses with a bare
// INVALID_VALUE: once refused, cudyn asks the address's pool and, when it has
// one, says so in the error (the driver's code is kept). It is aligned to the value's
// size. The driver's 11.7 ABI is used where the driver has it, else the 8.0
// one, which a device must enable (CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1;
// off by default on drivers that have both). 64-bit values need
// DeviceCapabilities::stream_memory_ops_64_bit, WaitCondition::Nor needs
// stream_wait_value_nor, flushing remote writes needs flush_remote_writes:
// NotSupported before the driver is asked, naming the attribute.
//
// The stream argument is required: these operations have no synchronous
// form (a wait that blocked the caller would be a host spin). Ordering set up
// this way is invisible to CUDA: work that depends on it across streams must
// also be ordered with events, or the scheduler may serialize it wrongly and
// deadlock.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/stream_ref.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cudyn {

// When a wait is over (CUstreamWaitValue_flags).
enum class WaitCondition : unsigned {
    GreaterOrEqual = CU_STREAM_WAIT_VALUE_GEQ,  // (signed)(*address - value) >= 0: cyclic, ignores wraparound
    Equal = CU_STREAM_WAIT_VALUE_EQ,            // *address == value
    And = CU_STREAM_WAIT_VALUE_AND,             // (*address & value) != 0
    Nor = CU_STREAM_WAIT_VALUE_NOR,             // ~(*address | value) != 0 (stream_wait_value_nor)
};

// A condition, and whether the wait flushes remote writes once it is met
// (CU_STREAM_WAIT_VALUE_FLUSH: a remote write that reached the device before
// the wait ended is visible to the work after it; flush_remote_writes).
struct WaitRule {
    WaitCondition condition = WaitCondition::GreaterOrEqual;
    bool flush_remote_writes = false;
    constexpr WaitRule() noexcept = default;
    constexpr WaitRule(WaitCondition when, bool flush = false) noexcept  // NOLINT: implicit on purpose
        : condition(when), flush_remote_writes(flush) {}
};

// One operation each, enqueued on `stream`.
Result<void> write_value32(CUdeviceptr address, std::uint32_t value, StreamRef stream);
Result<void> write_value64(CUdeviceptr address, std::uint64_t value, StreamRef stream);
Result<void> wait_value32(CUdeviceptr address, std::uint32_t value, WaitRule rule, StreamRef stream);
Result<void> wait_value64(CUdeviceptr address, std::uint64_t value, WaitRule rule, StreamRef stream);

// Several operations enqueued by one driver call, in the order added
// (cuStreamBatchMemOp; fewer than 256). Each add checks its own arguments;
// execute checks what the device must support and enqueues them all or,
// when the driver refuses, none.
class StreamMemoryBatch {
public:
    static constexpr std::size_t kMaxOperations = 255;

    Result<void> write_value32(CUdeviceptr address, std::uint32_t value);
    Result<void> write_value64(CUdeviceptr address, std::uint64_t value);
    Result<void> wait_value32(CUdeviceptr address, std::uint32_t value, WaitRule rule);
    Result<void> wait_value64(CUdeviceptr address, std::uint64_t value, WaitRule rule);

    std::size_t size() const noexcept { return operations_.size(); }
    bool empty() const noexcept { return operations_.empty(); }
    void clear() noexcept { operations_.clear(); }

    // InvalidArgument for an empty batch.
    Result<void> execute(StreamRef stream) const;

private:
    Result<void> add(CUstreamBatchMemOpParams operation, const char* what);
    std::vector<CUstreamBatchMemOpParams> operations_;
};

}  // namespace cudyn
