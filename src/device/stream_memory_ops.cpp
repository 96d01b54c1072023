// cudyn — stream memory operations: argument checks, the ABI choice and the
// device gates, then one driver call.
#include "cudyn/device/stream_memory_ops.hpp"

#include "core/internal.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "device/device_facts.hpp"
#include "device/internal.hpp"

#include <string>

namespace cudyn {

namespace {

using detail::Operation;

constexpr Operation kWrite32{"write_value32"};
constexpr Operation kWrite64{"write_value64"};
constexpr Operation kWait32{"wait_value32"};
constexpr Operation kWait64{"wait_value64"};
constexpr Operation kBatch{"StreamMemoryBatch::execute"};

// What the operations of one call need from the device.
struct Needs {
    bool wide = false;   // a 64-bit value
    bool nor = false;    // WaitCondition::Nor
    bool flush = false;  // WaitRule::flush_remote_writes
};

Result<void> check_address(const Operation& op, CUdeviceptr address, std::size_t width) {
    if (address == 0) return op.invalid("address is 0");
    if (address % width != 0)
        return op.invalid("address " + detail::hex(address) + " is not aligned to the value's " +
                          std::to_string(width) + " bytes");
    return ok();
}

Result<void> check_rule(const Operation& op, WaitRule rule) {
    if (static_cast<unsigned>(rule.condition) > CU_STREAM_WAIT_VALUE_NOR)
        return op.invalid("condition " + std::to_string(static_cast<unsigned>(rule.condition)) +
                          " is not a WaitCondition");
    return ok();
}

unsigned wait_flags(WaitRule rule) {
    return static_cast<unsigned>(rule.condition) | (rule.flush_remote_writes ? unsigned{CU_STREAM_WAIT_VALUE_FLUSH} : 0u);
}

// The device the stream's work runs on: an owned stream's, else the current
// context's (a default stream or a raw handle runs in it).
Result<CUdevice> stream_device(StreamRef stream) {
    if (stream.context() != nullptr && !stream.context()->empty()) return stream.context()->device();
    CUdevice device = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuCtxGetDevice_v2000, &device));
    return device;
}

Result<bool> attribute(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    auto asked = call_driver(&DriverTable::cuDeviceGetAttribute_v2000, &value, which, device);
    // An attribute the driver does not know reads as "no" (conventions.md).
    if (!asked && asked.error().driver_result == CUDA_ERROR_INVALID_VALUE) return false;
    CUDYN_TRY(std::move(asked));
    return value != 0;
}

// NotSupported, naming the entry and the attribute, unless the device can do
// what `needs` says with the ABI `v2` (true: the 11.7 one).
Result<void> check_device(const Operation& op, const char* entry, Needs needs, bool v2, StreamRef stream) {
    if (v2 && !needs.wide && !needs.nor && !needs.flush) return ok();  // the common case: no driver call
    CUDYN_TRY_ASSIGN(auto device, stream_device(stream));
    const auto require = [&](bool needed, CUdevice_attribute which, const char* name, const char* what) -> Result<void> {
        if (!needed) return ok();
        CUDYN_TRY_ASSIGN(auto has, attribute(device, which));
        if (!has)
            return op.not_supported(entry, "device " + std::to_string(device) + " reports " + name + " = 0: " + what);
        return ok();
    };
    if (!v2)
        CUDYN_TRY(require(true, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, "CAN_USE_STREAM_MEM_OPS_V1",
                          "this driver has only the 8.0 memory-operation ABI, and the device has it disabled"));
    if (v2 && (needs.wide || needs.nor || needs.flush)) {
        // Cached: the 11.7 attributes are capability rows.
        CUDYN_TRY_ASSIGN(auto caps, detail::capabilities(static_cast<int>(device), device));
        if (needs.wide && !caps.stream_memory_ops_64_bit)
            return op.not_supported(entry, "device " + std::to_string(device) +
                                               " reports CAN_USE_64_BIT_STREAM_MEM_OPS = 0: no 64-bit values");
        if (needs.nor && !caps.stream_wait_value_nor)
            return op.not_supported(entry, "device " + std::to_string(device) +
                                               " reports CAN_USE_STREAM_WAIT_VALUE_NOR = 0: no NOR waits");
        if (needs.flush && !caps.flush_remote_writes)
            return op.not_supported(entry, "device " + std::to_string(device) +
                                               " reports CAN_FLUSH_REMOTE_WRITES = 0: a wait cannot flush remote writes");
        return ok();
    }
    CUDYN_TRY(require(needs.wide, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1,
                      "CAN_USE_64_BIT_STREAM_MEM_OPS_V1", "no 64-bit values"));
    CUDYN_TRY(require(needs.nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1,
                      "CAN_USE_STREAM_WAIT_VALUE_NOR_V1", "no NOR waits"));
    CUDYN_TRY(require(needs.flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, "CAN_FLUSH_REMOTE_WRITES",
                      "a wait cannot flush remote writes"));
    return ok();
}

// Why the driver refused, where cudyn can tell: it answers INVALID_VALUE,
// and nothing more, to an operation on memory of a memory pool (measured:
// cuStreamWriteValue32 on memory of the default pool and of a created device
// pool, after a synchronize too). The pool is asked of the address only once
// the driver refused (one pointer-attribute query; nothing on success).
// Empty when that is not why.
std::string pool_refusal(const Error& error, CUdeviceptr address) {
    if (error.driver_result != CUDA_ERROR_INVALID_VALUE || detail::pool_of(address) == nullptr) return {};
    return "the memory at " + detail::hex(address) +
           " belongs to a memory pool (cuMemAllocAsync, cuMemAllocFromPoolAsync); the driver takes stream memory "
           "operations only on memory outside pools (cuMemAlloc memory, pinned or registered host memory, VMM "
           "mappings, IPC-opened memory)";
}

// One operation through the 11.7 entry `v2`, or the 8.0/9.0 entry `v1`.
template <typename Pv2, typename Pv1, typename Value>
Result<void> single(const Operation& op, Pv2 DriverTable::*v2, Pv1 DriverTable::*v1, const char* v2_name,
                    const char* v1_name, CUdeviceptr address, Value value, unsigned flags, Needs needs,
                    StreamRef stream) {
    CUDYN_TRY(check_address(op, address, sizeof(Value)));
    const bool use_v2 = has_entry(v2);
    if (!use_v2) CUDYN_TRY(detail::require_entry(v1));
    CUDYN_TRY(check_device(op, use_v2 ? v2_name : v1_name, needs, use_v2, stream));
    auto called = use_v2 ? call_driver(v2, stream.handle(), address, value, flags)
                         : call_driver(v1, stream.handle(), address, value, flags);
    if (!called) {
        Error error = std::move(called).error();
        if (std::string why = pool_refusal(error, address); !why.empty()) error.message = std::move(why);
        return op.context(std::move(error));
    }
    return ok();
}

}  // namespace

Result<void> write_value32(CUdeviceptr address, std::uint32_t value, StreamRef stream) {
    return single(kWrite32, &DriverTable::cuStreamWriteValue32_v11070, &DriverTable::cuStreamWriteValue32_v8000,
                  "cuStreamWriteValue32_v2", "cuStreamWriteValue32", address, value, 0u, Needs{}, stream);
}

Result<void> write_value64(CUdeviceptr address, std::uint64_t value, StreamRef stream) {
    return single(kWrite64, &DriverTable::cuStreamWriteValue64_v11070, &DriverTable::cuStreamWriteValue64_v9000,
                  "cuStreamWriteValue64_v2", "cuStreamWriteValue64", address, value, 0u, Needs{true, false, false},
                  stream);
}

Result<void> wait_value32(CUdeviceptr address, std::uint32_t value, WaitRule rule, StreamRef stream) {
    CUDYN_TRY(check_rule(kWait32, rule));
    const Needs needs{false, rule.condition == WaitCondition::Nor, rule.flush_remote_writes};
    return single(kWait32, &DriverTable::cuStreamWaitValue32_v11070, &DriverTable::cuStreamWaitValue32_v8000,
                  "cuStreamWaitValue32_v2", "cuStreamWaitValue32", address, value, wait_flags(rule), needs, stream);
}

Result<void> wait_value64(CUdeviceptr address, std::uint64_t value, WaitRule rule, StreamRef stream) {
    CUDYN_TRY(check_rule(kWait64, rule));
    const Needs needs{true, rule.condition == WaitCondition::Nor, rule.flush_remote_writes};
    return single(kWait64, &DriverTable::cuStreamWaitValue64_v11070, &DriverTable::cuStreamWaitValue64_v9000,
                  "cuStreamWaitValue64_v2", "cuStreamWaitValue64", address, value, wait_flags(rule), needs, stream);
}

// ---- batches ---------------------------------------------------------------------------------------

Result<void> StreamMemoryBatch::add(CUstreamBatchMemOpParams operation, const char* what) {
    if (operations_.size() >= kMaxOperations)
        return Operation(what).invalid("the batch already holds " + std::to_string(kMaxOperations) +
                                       " operations, the most one driver call takes");
    operations_.push_back(operation);
    return ok();
}

Result<void> StreamMemoryBatch::write_value32(CUdeviceptr address, std::uint32_t value) {
    constexpr Operation kAdd{"StreamMemoryBatch::write_value32"};
    CUDYN_TRY(check_address(kAdd, address, 4));
    CUstreamBatchMemOpParams p{};
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p.writeValue.address = address;
    p.writeValue.value = value;
    return add(p, kAdd.name());
}

Result<void> StreamMemoryBatch::write_value64(CUdeviceptr address, std::uint64_t value) {
    constexpr Operation kAdd{"StreamMemoryBatch::write_value64"};
    CUDYN_TRY(check_address(kAdd, address, 8));
    CUstreamBatchMemOpParams p{};
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p.writeValue.address = address;
    p.writeValue.value64 = value;
    return add(p, kAdd.name());
}

Result<void> StreamMemoryBatch::wait_value32(CUdeviceptr address, std::uint32_t value, WaitRule rule) {
    constexpr Operation kAdd{"StreamMemoryBatch::wait_value32"};
    CUDYN_TRY(check_address(kAdd, address, 4));
    CUDYN_TRY(check_rule(kAdd, rule));
    CUstreamBatchMemOpParams p{};
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p.waitValue.address = address;
    p.waitValue.value = value;
    p.waitValue.flags = wait_flags(rule);
    return add(p, kAdd.name());
}

Result<void> StreamMemoryBatch::wait_value64(CUdeviceptr address, std::uint64_t value, WaitRule rule) {
    constexpr Operation kAdd{"StreamMemoryBatch::wait_value64"};
    CUDYN_TRY(check_address(kAdd, address, 8));
    CUDYN_TRY(check_rule(kAdd, rule));
    CUstreamBatchMemOpParams p{};
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    p.waitValue.address = address;
    p.waitValue.value64 = value;
    p.waitValue.flags = wait_flags(rule);
    return add(p, kAdd.name());
}

Result<void> StreamMemoryBatch::execute(StreamRef stream) const {
    if (operations_.empty()) return kBatch.invalid("the batch is empty");
    Needs needs;
    for (const CUstreamBatchMemOpParams& p : operations_) {
        needs.wide = needs.wide || p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64 ||
                     p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
        if (p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 || p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
            const unsigned condition = p.waitValue.flags & ~unsigned{CU_STREAM_WAIT_VALUE_FLUSH};
            needs.nor = needs.nor || condition == CU_STREAM_WAIT_VALUE_NOR;
            needs.flush = needs.flush || (p.waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0;
        }
    }
    const bool use_v2 = has_entry(&DriverTable::cuStreamBatchMemOp_v11070);
    if (!use_v2) CUDYN_TRY(detail::require_entry(&DriverTable::cuStreamBatchMemOp_v8000));
    CUDYN_TRY(check_device(kBatch, use_v2 ? "cuStreamBatchMemOp_v2" : "cuStreamBatchMemOp", needs, use_v2, stream));
    // The driver's parameter is not const (it keeps an internal alias field):
    // a copy, so execute() leaves the batch as it was and may run again.
    std::vector<CUstreamBatchMemOpParams> operations = operations_;
    const auto count = static_cast<unsigned>(operations.size());
    auto called = use_v2 ? call_driver(&DriverTable::cuStreamBatchMemOp_v11070, stream.handle(), count,
                                       operations.data(), 0u)
                         : call_driver(&DriverTable::cuStreamBatchMemOp_v8000, stream.handle(), count,
                                       operations.data(), 0u);
    if (!called) {
        Error error = std::move(called).error();
        // The first operation on pool memory, if any, is the one to name.
        for (std::size_t i = 0; i < operations_.size(); ++i) {
            const CUstreamBatchMemOpParams& p = operations_[i];
            const bool write = p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
                               p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
            std::string why = pool_refusal(error, write ? p.writeValue.address : p.waitValue.address);
            if (why.empty()) continue;
            error.message = "operation " + std::to_string(i) + " (counting from 0): " + why;
            break;
        }
        error = kBatch.context(std::move(error));
        error.message += " (one call for " + std::to_string(count) + " operations)";
        return error;
    }
    return ok();
}

}  // namespace cudyn
