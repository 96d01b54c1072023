// Stream memory operations against the fake ([emulated][async], and the two
// ABIs on [cuda11][device] / [legacy][device]): writes land in stream order,
// a wait holds its stream until the value condition holds (the fake bounds
// it: FAKECUDA_STREAM_WAIT_TIMEOUT_MS), the device gates (64-bit, NOR,
// flush) refuse before the driver is asked, and bad input names what was
// wrong.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/stream.hpp"
#include "cudyn/device/stream_memory_ops.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <atomic>
#include <cstdio>
#include <string>
#include <chrono>
#include <cstdint>
#include <thread>

using cudyn::ErrorCode;
using cudyn::Stream;
using cudyn::StreamMemoryBatch;
using cudyn::WaitCondition;
using cudyn::WaitRule;
using namespace cudyn_test;

namespace {

std::uint32_t peek32(CUdeviceptr address) {
    return __atomic_load_n(reinterpret_cast<const std::uint32_t*>(address), __ATOMIC_ACQUIRE);
}
std::uint64_t peek64(CUdeviceptr address) {
    return __atomic_load_n(reinterpret_cast<const std::uint64_t*>(address), __ATOMIC_ACQUIRE);
}
void poke32(CUdeviceptr address, std::uint32_t value) {
    __atomic_store_n(reinterpret_cast<std::uint32_t*>(address), value, __ATOMIC_RELEASE);
}

// The stream's work is still pending (the wait holds it).
bool pending(const Stream& stream) { return !take(stream.query()); }

// Bounds a value wait for a scope, then back to the suite's setting.
class ScopedWaitTimeout {
public:
    explicit ScopedWaitTimeout(unsigned ms) { FakeDriver::loaded().set_stream_wait_timeout_ms(ms); }
    ~ScopedWaitTimeout() {
        const char* suite = std::getenv("FAKECUDA_STREAM_WAIT_TIMEOUT_MS");
        FakeDriver::loaded().set_stream_wait_timeout_ms(suite ? static_cast<unsigned>(std::strtoul(suite, nullptr, 10))
                                                              : 10000u);
    }
    ScopedWaitTimeout(const ScopedWaitTimeout&) = delete;
    ScopedWaitTimeout& operator=(const ScopedWaitTimeout&) = delete;
};

}  // namespace

TEST_CASE("write_value32/64 land in stream order, after the work before them", "[emulated][async]") {
    auto context = activate(0);
    auto words = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(4));
    require_ok(words.set_bytes(0));
    const Stream stream = take(Stream::create(false));
    {
        const ScopedStreamDelay slow(50'000);
        require_ok(cudyn::write_value32(words.device_address(), 0xA5A5A5A5u, stream));
        require_ok(cudyn::write_value64(words.device_address() + 8, 0x0123456789ABCDEFull, stream));
        CHECK(peek32(words.device_address()) == 0u);  // not yet: stream work
        require_ok(stream.synchronize());
    }
    CHECK(peek32(words.device_address()) == 0xA5A5A5A5u);
    CHECK(peek32(words.device_address() + 4) == 0u);  // a 32-bit write leaves the next word
    CHECK(peek64(words.device_address() + 8) == 0x0123456789ABCDEFull);
}

TEST_CASE("a value wait holds its stream until the host writes the flag", "[emulated][async]") {
    auto context = activate(0);
    // The flag in mapped pinned memory, where the host writes it; the data on the device.
    auto flag = take(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(1));
    flag.data()[0] = 0;
    auto data = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
    require_ok(data.fill(0u));
    const Stream stream = take(Stream::create(false));
    require_ok(cudyn::wait_value32(flag.device_address(), 1, WaitCondition::Equal, stream));
    require_ok(cudyn::write_value32(data.device_address(), 7, stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(pending(stream));
    CHECK(peek32(data.device_address()) == 0u);  // the write after the wait has not run
    poke32(reinterpret_cast<CUdeviceptr>(flag.data()), 1);
    require_ok(stream.synchronize());
    CHECK(peek32(data.device_address()) == 7u);
}

TEST_CASE("every wait condition: GEQ is cyclic, EQ, AND, NOR", "[emulated][async]") {
    auto context = activate(0);
    auto flag = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
    const Stream stream = take(Stream::create(false));
    struct Case {
        std::uint32_t memory;
        std::uint32_t value;
        WaitCondition condition;
        bool met;
        std::uint32_t release;  // what the host writes to end an unmet wait
    };
    const Case cases[] = {
        {5, 5, WaitCondition::GreaterOrEqual, true, 0},
        {4, 5, WaitCondition::GreaterOrEqual, false, 5},
        {1, 0xFFFFFFF0u, WaitCondition::GreaterOrEqual, true, 0},  // cyclic: 1 - (-16) >= 0
        {0xFFFFFFF0u, 1, WaitCondition::GreaterOrEqual, false, 1},
        {3, 3, WaitCondition::Equal, true, 0},
        {3, 4, WaitCondition::Equal, false, 4},
        {0b0110, 0b0100, WaitCondition::And, true, 0},
        {0b0110, 0b1001, WaitCondition::And, false, 0b1000},
        {0b0110, 0b1001, WaitCondition::Nor, true, 0},              // ~(0b1111) has the high bits
        {0xFFFF0000u, 0x0000FFFFu, WaitCondition::Nor, false, 0},  // ~(all ones) == 0
    };
    const ScopedWaitTimeout bounded(10000);
    for (const Case& c : cases) {
        INFO("memory " << c.memory << " value " << c.value << " condition " << static_cast<unsigned>(c.condition));
        require_ok(flag.fill(c.memory));
        require_ok(cudyn::wait_value32(flag.device_address(), c.value, c.condition, stream));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        CHECK(pending(stream) == !c.met);
        if (!c.met) poke32(flag.device_address(), c.release);
        require_ok(stream.synchronize());
    }
}

TEST_CASE("a 64-bit wait released by a 64-bit write on another stream", "[emulated][async]") {
    auto context = activate(0);
    auto word = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(1));
    require_ok(word.set_bytes(0));
    const Stream waiter = take(Stream::create(false));
    const Stream writer = take(Stream::create(false));
    require_ok(cudyn::wait_value64(word.device_address(), 0x100000000ull, WaitCondition::GreaterOrEqual, waiter));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(pending(waiter));
    require_ok(cudyn::write_value64(word.device_address(), 0x100000001ull, writer));
    require_ok(waiter.synchronize());
    CHECK(peek64(word.device_address()) == 0x100000001ull);
}

TEST_CASE("a batch runs its operations in order, one driver call", "[emulated][async]") {
    auto context = activate(0);
    auto flag = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(2));
    flag.data()[0] = 0;
    flag.data()[1] = 0;
    auto data = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(2));
    require_ok(data.set_bytes(0));
    const Stream stream = take(Stream::create(false));
    StreamMemoryBatch batch;
    require_ok(batch.write_value32(reinterpret_cast<CUdeviceptr>(flag.data()) + 4, 1));  // "started"
    require_ok(batch.wait_value32(reinterpret_cast<CUdeviceptr>(flag.data()), 2, WaitCondition::GreaterOrEqual));
    require_ok(batch.write_value64(data.device_address(), 0xFEEDull));
    CHECK(batch.size() == 3);
    FakeDriver::loaded().reset_counts();
    require_ok(batch.execute(stream));
    CHECK(FakeDriver::loaded().call_count("cuStreamBatchMemOp_v2") == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(__atomic_load_n(&flag.data()[1], __ATOMIC_ACQUIRE) == 1u);  // before the wait: done
    CHECK(peek64(data.device_address()) == 0u);                         // after it: held
    __atomic_store_n(&flag.data()[0], 2u, __ATOMIC_RELEASE);
    require_ok(stream.synchronize());
    CHECK(peek64(data.device_address()) == 0xFEEDull);
    CHECK(batch.size() == 3);  // execute leaves the batch as it was
}

TEST_CASE("a wait that is never met fails its context after the fake's timeout, not a hang", "[emulated][async]") {
    {
        auto context = activate(1);
        auto flag = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
        require_ok(flag.fill(0u));
        const Stream stream = take(Stream::create(false));
        const ScopedWaitTimeout bounded(50);
        require_ok(cudyn::wait_value32(flag.device_address(), 1, WaitCondition::Equal, stream));
        const auto synchronized = stream.synchronize();
        REQUIRE_FALSE(synchronized.has_value());
        CHECK(synchronized.error().driver_result == CUDA_ERROR_LAUNCH_TIMEOUT);
        CHECK(FakeDriver::loaded().context_error(1) == CUDA_ERROR_LAUNCH_TIMEOUT);
    }
    CHECK(FakeDriver::loaded().context_error(1) == 0);  // the last release destroyed it
}

TEST_CASE("stream memory operations refuse bad input before the driver", "[emulated][async]") {
    auto context = activate(0);
    auto words = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(2));
    const Stream stream = take(Stream::create(false));
    FakeDriver::loaded().reset_counts();
    require_error(cudyn::write_value32(0, 1, stream), ErrorCode::InvalidArgument, "write_value32: address is 0");
    require_error(cudyn::write_value32(words.device_address() + 2, 1, stream), ErrorCode::InvalidArgument,
                  "not aligned to the value's 4 bytes");
    require_error(cudyn::write_value64(words.device_address() + 4, 1, stream), ErrorCode::InvalidArgument,
                  "not aligned to the value's 8 bytes");
    require_error(cudyn::wait_value32(words.device_address(), 1, static_cast<WaitCondition>(7), stream),
                  ErrorCode::InvalidArgument, "condition 7 is not a WaitCondition");
    StreamMemoryBatch batch;
    require_error(batch.execute(stream), ErrorCode::InvalidArgument, "the batch is empty");
    for (std::size_t i = 0; i < StreamMemoryBatch::kMaxOperations; ++i)
        require_ok(batch.write_value32(words.device_address(), static_cast<std::uint32_t>(i)));
    require_error(batch.write_value32(words.device_address(), 0), ErrorCode::InvalidArgument, "already holds 255");
    CHECK(FakeDriver::loaded().call_count("cuStreamWriteValue32_v2") == 0);
    CHECK(FakeDriver::loaded().call_count("cuStreamBatchMemOp_v2") == 0);
    // Managed memory: the driver's refusal, named.
    auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1));
    const auto refused = cudyn::write_value32(managed.device_address(), 1, stream);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(refused.error().message.find("write_value32") != std::string::npos);
}

// The real driver refuses every stream memory operation on memory of a pool
// (the default pool's or a created one's) with a bare INVALID_VALUE, and
// takes cuMemAlloc memory. cudyn keeps the driver's code and says why, from
// the memory's pool, asked only once the driver refused.
TEST_CASE("stream memory operations on pool memory: refused by the driver, the error says why", "[emulated][async]") {
    auto context = activate(0);
    const Stream stream = take(Stream::create());
    auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
    auto from_default = take(cudyn::StreamOrderedBuffer<std::uint64_t>::allocate(4, stream));
    auto from_pool = take(cudyn::StreamOrderedBuffer<std::uint64_t>::allocate(pool, 4, stream));
    auto plain = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(4));
    require_ok(stream.synchronize());  // refused after a synchronize too
    const auto refused_for_pool = [](const cudyn::Result<void>& result, const char* operation, CUdeviceptr address) {
        require_error(result, ErrorCode::Driver, "belongs to a memory pool");
        CHECK(result.error().driver_result == CUDA_ERROR_INVALID_VALUE);
        const std::string text = result.error().describe();
        INFO(text);
        CHECK(result.error().message.rfind(operation, 0) == 0);  // the message begins with the operation
        char where[32];
        std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(address));
        CHECK(text.find(where) != std::string::npos);
    };
    for (const CUdeviceptr address : {from_default.device_address(), from_pool.device_address()}) {
        const DriverSnapshot calls({"cuPointerGetAttribute"});
        refused_for_pool(cudyn::write_value32(address, 1u, stream), "write_value32", address);
        refused_for_pool(cudyn::write_value64(address, 1u, stream), "write_value64", address);
        refused_for_pool(cudyn::wait_value32(address, 0u, WaitCondition::GreaterOrEqual, stream), "wait_value32",
                         address);
        refused_for_pool(cudyn::wait_value64(address, 0u, WaitCondition::GreaterOrEqual, stream), "wait_value64",
                         address);
        CHECK(calls.calls_since("cuPointerGetAttribute") == 4);  // one per refusal
    }
    // A batch names its first operation on pool memory.
    StreamMemoryBatch batch;
    require_ok(batch.write_value32(plain.device_address(), 1u));
    require_ok(batch.write_value32(from_pool.device_address() + 8, 2u));
    refused_for_pool(batch.execute(stream), "StreamMemoryBatch::execute", from_pool.device_address() + 8);
    require_error(batch.execute(stream), ErrorCode::Driver, "operation 1 (counting from 0)");
    // cuMemAlloc memory is taken, with no question asked on success.
    {
        const DriverSnapshot calls({"cuPointerGetAttribute"});
        require_ok(cudyn::write_value32(plain.device_address(), 0xA11u, stream));
        require_ok(stream.synchronize());
        CHECK(peek32(plain.device_address()) == 0xA11u);
        CHECK(calls.calls_since("cuPointerGetAttribute") == 0);
    }
    // A refusal for another reason is not blamed on a pool (managed memory).
    auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(4));
    const auto other = cudyn::write_value32(managed.device_address(), 1u, stream);
    REQUIRE_FALSE(other.has_value());
    CHECK(other.error().driver_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(other.error().describe().find("pool") == std::string::npos);
    require_ok(from_pool.free());
    require_ok(from_default.free());
    require_ok(stream.synchronize());
}

TEST_CASE("64-bit values, NOR and flush are gated on the device's attributes", "[emulated][async]") {
    auto context = activate(0);
    auto words = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(1));
    const Stream stream = take(Stream::create(false));
    {
        const ScopedAttribute no64(0, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0);
        require_error(cudyn::write_value64(words.device_address(), 1, stream), ErrorCode::NotSupported,
                      "CAN_USE_64_BIT_STREAM_MEM_OPS = 0");
        StreamMemoryBatch batch;
        require_ok(batch.wait_value64(words.device_address(), 1, WaitCondition::Equal));
        require_error(batch.execute(stream), ErrorCode::NotSupported, "CAN_USE_64_BIT_STREAM_MEM_OPS = 0");
        require_ok(cudyn::write_value32(words.device_address(), 1, stream));  // 32 bits still work
    }
    {
        const ScopedAttribute no_nor(0, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, 0);
        require_error(cudyn::wait_value32(words.device_address(), 1, WaitCondition::Nor, stream),
                      ErrorCode::NotSupported, "CAN_USE_STREAM_WAIT_VALUE_NOR = 0");
    }
    // The fake's device cannot flush remote writes (CAN_FLUSH_REMOTE_WRITES 0, as measured machines).
    require_error(cudyn::wait_value32(words.device_address(), 1, WaitRule(WaitCondition::Equal, true), stream),
                  ErrorCode::NotSupported, "CAN_FLUSH_REMOTE_WRITES = 0");
    require_ok(stream.synchronize());
}

TEST_CASE("the 11.7 ABI is used where the driver has it", "[cuda11][device]") {
    auto context = activate(0);
    auto word = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
    const Stream stream = take(Stream::create(false));
    FakeDriver::loaded().reset_counts();
    require_ok(cudyn::write_value32(word.device_address(), 9, stream));
    require_ok(cudyn::wait_value32(word.device_address(), 9, WaitCondition::Equal, stream));
    require_ok(stream.synchronize());
    CHECK(FakeDriver::loaded().call_count("cuStreamWriteValue32_v2") == 1);
    CHECK(FakeDriver::loaded().call_count("cuStreamWaitValue32_v2") == 1);
    CHECK(FakeDriver::loaded().call_count("cuStreamWriteValue32") == 0);
    CHECK(peek32(word.device_address()) == 9u);
}

TEST_CASE("the 8.0 ABI where it is the only one, gated on the _V1 attributes", "[legacy][device]") {
    auto context = activate(0);
    auto word = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(1));
    require_ok(word.set_bytes(0));
    const Stream stream = take(Stream::create(false));
    FakeDriver::loaded().reset_counts();
    require_ok(cudyn::write_value64(word.device_address(), 0x1234567890ull, stream));
    require_ok(cudyn::wait_value64(word.device_address(), 0x1234567890ull, WaitCondition::Equal, stream));
    StreamMemoryBatch batch;
    require_ok(batch.write_value32(word.device_address(), 5));
    require_ok(batch.execute(stream));
    require_ok(stream.synchronize());
    CHECK(FakeDriver::loaded().call_count("cuStreamWriteValue64") == 1);
    CHECK(FakeDriver::loaded().call_count("cuStreamWaitValue64") == 1);
    CHECK(FakeDriver::loaded().call_count("cuStreamBatchMemOp") == 1);
    CHECK(peek32(word.device_address()) == 5u);
    {
        const ScopedAttribute off(0, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
        require_error(cudyn::write_value32(word.device_address(), 1, stream), ErrorCode::NotSupported,
                      "CAN_USE_STREAM_MEM_OPS_V1 = 0");
    }
    {
        const ScopedAttribute no64(0, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1, 0);
        require_error(cudyn::write_value64(word.device_address(), 1, stream), ErrorCode::NotSupported,
                      "CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 0");
    }
}
