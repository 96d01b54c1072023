// gpu suite: stream memory operations, managed memory attached to a stream,
// and access over a whole VMM reservation, on one GPU.
//
//   [gpu][stream-ops]  write_value32/64 land in stream order (device and
//                      mapped pinned memory); a wait holds its stream until
//                      the host writes the flag; a batch runs in order; the
//                      64-bit and NOR gates agree with the device's
//                      attributes; bad input refused before the driver
//   [gpu][managed]     attach_to_stream: Single, then the host touches the
//                      memory once the stream is idle; Single on the legacy
//                      stream is refused, as the raw call refuses it
//   [gpu][vmm]         set_range_access over three chunks, one span across
//                      them filled and read back; an unmapped byte and a
//                      read-only chunk refused
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/device/stream_memory_ops.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/stream_attachment.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/vmm/range_access.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using cudyn::AccessFlags;
using cudyn::DriverTable;
using cudyn::ErrorCode;
using cudyn::Location;
using cudyn::Stream;
using cudyn::WaitCondition;
using cudyn::call_driver;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

cudyn::PrimaryContext activate() { return take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0)))); }

cudyn::DeviceCapabilities capabilities() { return take(cudyn::probe_capabilities(take(cudyn::Device::get(0)))); }

template <typename T>
T read_back(CUdeviceptr address) {
    T value{};
    require_ok(call_driver(&DriverTable::cuMemcpyDtoH_v3020, &value, address, sizeof value));
    return value;
}

void require_healthy() { require_ok(call_driver(&DriverTable::cuCtxSynchronize_v2000)); }

}  // namespace

TEST_CASE("stream value writes land in stream order, in device and mapped pinned memory", "[gpu][stream-ops]") {
    auto context = activate();
    auto words = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(2));
    require_ok(words.set_bytes(0));
    auto pinned = take(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(1));
    pinned.data()[0] = 0;
    const Stream stream = take(Stream::create(false));
    require_ok(cudyn::write_value32(words.device_address(), 0xA5A5A5A5u, stream));
    require_ok(cudyn::write_value32(pinned.device_address(), 0x600Du, stream));
    if (capabilities().stream_memory_ops_64_bit) {
        require_ok(cudyn::write_value64(words.device_address() + 8, 0x0123456789ABCDEFull, stream));
    } else {
        CHECK(cudyn::write_value64(words.device_address() + 8, 1, stream).error().code == ErrorCode::NotSupported);
    }
    require_ok(stream.synchronize());
    CHECK(read_back<std::uint32_t>(words.device_address()) == 0xA5A5A5A5u);
    CHECK(read_back<std::uint32_t>(words.device_address() + 4) == 0u);
    CHECK(__atomic_load_n(&pinned.data()[0], __ATOMIC_ACQUIRE) == 0x600Du);
    if (capabilities().stream_memory_ops_64_bit)
        CHECK(read_back<std::uint64_t>(words.device_address() + 8) == 0x0123456789ABCDEFull);
    require_healthy();
}

TEST_CASE("a value wait holds its stream until the host writes the flag", "[gpu][stream-ops]") {
    auto context = activate();
    auto flag = take(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(1));
    __atomic_store_n(&flag.data()[0], 0u, __ATOMIC_RELEASE);
    auto data = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
    require_ok(data.fill(0u));
    const Stream stream = take(Stream::create(false));
    require_ok(cudyn::wait_value32(flag.device_address(), 1, WaitCondition::Equal, stream));
    require_ok(cudyn::write_value32(data.device_address(), 7, stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(take(stream.query()));  // held by the wait
    __atomic_store_n(&flag.data()[0], 1u, __ATOMIC_RELEASE);
    require_ok(stream.synchronize());
    CHECK(read_back<std::uint32_t>(data.device_address()) == 7u);
    require_healthy();
}

TEST_CASE("a batch runs in order: a write, a wait the host ends, a write after it", "[gpu][stream-ops]") {
    auto context = activate();
    auto flags = take(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(2));
    __atomic_store_n(&flags.data()[0], 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&flags.data()[1], 0u, __ATOMIC_RELEASE);
    auto data = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
    require_ok(data.fill(0u));
    const Stream stream = take(Stream::create(false));
    cudyn::StreamMemoryBatch batch;
    require_ok(batch.write_value32(flags.device_address() + 4, 1));
    require_ok(batch.wait_value32(flags.device_address(), 2, WaitCondition::GreaterOrEqual));
    require_ok(batch.write_value32(data.device_address(), 9));
    require_ok(batch.execute(stream));
    // The first write is done before the wait is; the last waits for the host.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (__atomic_load_n(&flags.data()[1], __ATOMIC_ACQUIRE) != 1u && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(__atomic_load_n(&flags.data()[1], __ATOMIC_ACQUIRE) == 1u);
    CHECK_FALSE(take(stream.query()));
    __atomic_store_n(&flags.data()[0], 2u, __ATOMIC_RELEASE);
    require_ok(stream.synchronize());
    CHECK(read_back<std::uint32_t>(data.device_address()) == 9u);
    require_healthy();
}

TEST_CASE("64-bit waits and NOR follow the device's attributes", "[gpu][stream-ops]") {
    auto context = activate();
    const auto caps = capabilities();
    auto word = take(cudyn::DeviceBuffer<std::uint64_t>::allocate(1));
    require_ok(word.set_bytes(0));
    const Stream stream = take(Stream::create(false));
    // Conditions already met: nothing holds the stream.
    const auto wide = cudyn::wait_value64(word.device_address(), 0, WaitCondition::Equal, stream);
    CHECK(wide.has_value() == caps.stream_memory_ops_64_bit);
    if (!wide) CHECK(wide.error().code == ErrorCode::NotSupported);
    const auto nor = cudyn::wait_value32(word.device_address(), 1, WaitCondition::Nor, stream);  // ~(0 | 1) != 0
    CHECK(nor.has_value() == caps.stream_wait_value_nor);
    if (!nor) CHECK(nor.error().code == ErrorCode::NotSupported);
    require_ok(stream.synchronize());
    require_healthy();
}

// The driver refuses a value write to memory of the default pool or of a
// created device pool (INVALID_VALUE), after a synchronize too, and takes
// cuMemAlloc memory: the error keeps the driver's code and says why.
TEST_CASE("a value write to pool memory is refused, and the error says it is pool memory", "[gpu][stream-ops]") {
    auto context = activate();
    INFO("device 0 reports no memory pools");
    REQUIRE(capabilities().memory_pools);
    const Stream stream = take(Stream::create());
    auto pool = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
    auto from_default = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(4, stream));
    auto from_pool = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 4, stream));
    require_ok(stream.synchronize());
    for (const CUdeviceptr address : {from_default.device_address(), from_pool.device_address()}) {
        const auto written = cudyn::write_value32(address, 1u, stream);
        REQUIRE_FALSE(written.has_value());
        const std::string text = written.error().describe();
        INFO(text);
        CHECK(written.error().driver_result == CUDA_ERROR_INVALID_VALUE);
        CHECK(written.error().message.rfind("write_value32", 0) == 0);
        CHECK(text.find("belongs to a memory pool") != std::string::npos);
    }
    auto plain = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1));
    require_ok(cudyn::write_value32(plain.device_address(), 0x5EEDu, stream));
    require_ok(stream.synchronize());
    CHECK(read_back<std::uint32_t>(plain.device_address()) == 0x5EEDu);
    require_ok(from_pool.free());
    require_ok(from_default.free());
    require_ok(stream.synchronize());
    require_healthy();
}

TEST_CASE("bad input is refused before the driver: a misaligned address, an empty batch", "[gpu][stream-ops]") {
    auto context = activate();
    auto word = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(2));
    const Stream stream = take(Stream::create(false));
    // Not handed to the driver: a misaligned device write is not something to try on a GPU.
    CHECK(cudyn::write_value32(word.device_address() + 2, 1, stream).error().code == ErrorCode::InvalidArgument);
    CHECK(cudyn::StreamMemoryBatch().execute(stream).error().code == ErrorCode::InvalidArgument);
    require_ok(stream.synchronize());
    require_healthy();
}

TEST_CASE("attach_to_stream: Single, then the host touches the memory once the stream is idle", "[gpu][managed]") {
    auto context = activate();
    REQUIRE(capabilities().managed_memory);
    auto buffer = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    const Stream stream = take(Stream::create(false));
    require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Single, stream));
    require_ok(buffer.device_span().fill(3u, stream));
    require_ok(stream.synchronize());
    // Allowed whatever other streams do: only `stream` may use the memory, and it is idle.
    for (std::uint32_t i = 0; i < 1024; ++i) CHECK(buffer.data()[i] == 3u);
    buffer.data()[0] = 4u;
    require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Host, stream));
    require_ok(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Global, stream));
    require_ok(stream.synchronize());
    CHECK(read_back<std::uint32_t>(buffer.device_address()) == 4u);
    // Single on the legacy stream: cudyn says so before the driver; the driver refuses it too.
    CHECK(cudyn::attach_to_stream(buffer, cudyn::StreamAttachment::Single, Stream::legacy_default()).error().code ==
          ErrorCode::InvalidArgument);
    const CUresult raw =
        cudyn::driver().cuStreamAttachMemAsync_v6000(nullptr, buffer.device_address(), 0, CU_MEM_ATTACH_SINGLE);
    INFO("raw cuStreamAttachMemAsync(NULL stream, SINGLE): " << raw);
    CHECK(raw != CUDA_SUCCESS);
    require_healthy();
}

TEST_CASE("set_range_access: three chunks in one call, one span across them", "[gpu][vmm]") {
    auto context = activate();
    REQUIRE(capabilities().virtual_memory_management);
    const auto props = cudyn::AllocationProperties::device(0);
    const std::size_t chunk = take(cudyn::allocation_granularity(props));
    auto range = take(cudyn::AddressRange::reserve(3 * chunk));
    auto first = take(cudyn::PhysicalMemory::create(props, chunk));
    auto second = take(cudyn::PhysicalMemory::create(props, chunk));
    auto third = take(cudyn::PhysicalMemory::create(props, chunk));
    auto a = take(cudyn::MappedRange::map(range, 0, first));
    auto c = take(cudyn::MappedRange::map(range, 2 * chunk, third));
    // The middle chunk is missing: refused before the driver.
    CHECK(cudyn::set_range_access(range, {{Location::device(0), AccessFlags::ReadWrite}}).error().code ==
          ErrorCode::InvalidArgument);
    auto b = take(cudyn::MappedRange::map(range, chunk, second));
    require_ok(cudyn::set_range_access(range, {{Location::device(0), AccessFlags::ReadWrite}}));
    CHECK(take(a.access(Location::device(0))) == AccessFlags::ReadWrite);
    CHECK(take(c.access(Location::device(0))) == AccessFlags::ReadWrite);
    CHECK(take(cudyn::range_access(range, Location::device(0))) == AccessFlags::ReadWrite);
    auto all = take(cudyn::range_span_as<std::uint32_t>(range, Location::device(0)));
    require_ok(all.fill(0x5EED5EEDu));
    std::vector<std::uint32_t> host(all.size());
    require_ok(all.copy_to(host));
    std::size_t wrong = 0;
    for (std::uint32_t word : host) wrong += word != 0x5EED5EEDu ? 1 : 0;
    CHECK(wrong == 0);
    // A read-only chunk: a writable span over it is refused, a readable one made.
    require_ok(b.set_access(Location::device(0), AccessFlags::Read));
    CHECK(take(cudyn::range_access(range, Location::device(0))) == AccessFlags::Read);
    CHECK(cudyn::range_span_as<std::uint32_t>(range, Location::device(0)).error().code == ErrorCode::InvalidArgument);
    CHECK(cudyn::range_span_as<const std::uint32_t>(range, Location::device(0), AccessFlags::Read).has_value());
    require_healthy();
}
