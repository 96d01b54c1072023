// Pool sharing between processes ([pool-ipc], emulated and cuda11 fakes): a
// shareable pool passed as a POSIX descriptor over the channel, a pointer
// from it as a descriptor, the child importing both, reading the exporter's
// bytes after waiting on an interprocess event and writing its reply; the
// refusals made before the driver (malformed records, own-process imports,
// a pointer from another pool).
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/share/descriptor_transfer.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <fcntl.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using cudyn::ErrorCode;
using cudyn::HandleType;
using cudyn::MemoryPool;
using cudyn::PoolPointerDescriptor;
using cudyn::PoolProperties;
using cudyn::StreamOrderedBuffer;
using cudyn_test::ChildChecks;
using namespace cudyn_test;  // activate, take, require_ok, require_error
using namespace cudyn_test::ipc;

namespace {

constexpr std::size_t kWords = 1 << 18;  // 1 MiB
constexpr std::uint32_t kFirst = 0x900D0001u;
constexpr std::uint32_t kReply = 0x900D0002u;

PoolProperties shareable() { return PoolProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor); }

// Imports the pool and the pointer, waits for the exporter's event, checks
// the first half, writes the reply into the second, frees the import.
int pool_consumer_role(int, char**) {
    return run_role("pool-consumer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto pool = cudyn::receive_pool_fd(channel, kStep).and_then(cudyn::import_pool_fd);
        if (!ok(check, pool, "receive_pool_fd + import_pool_fd")) return;
        check.expect(pool->imported() && pool->owned(), "the imported pool is owned and knows it was imported");
        auto descriptor = receive_descriptor<PoolPointerDescriptor>(channel, kMemDescriptor);
        if (!ok(check, descriptor, "pointer descriptor")) return;
        auto event_descriptor = receive_descriptor<cudyn::IpcEventDescriptor>(channel, kEventDescriptor);
        if (!ok(check, event_descriptor, "event descriptor")) return;
        auto event = cudyn::import_ipc_event(*event_descriptor);
        if (!ok(check, event, "import_ipc_event")) return;
        {
            auto memory = cudyn::import_pool_pointer(*pool, *descriptor);
            if (!ok(check, memory, "import_pool_pointer")) return;
            check.expect(memory->size_bytes() == kWords * 4, "the shared size came along");
            ok(check, event->synchronize(), "wait for the exporter's fill");
            check.expect(same_words(memory->device_address(), kWords * 2, kFirst), "the exporter's bytes");
            ok(check, set_words(memory->device_address() + kWords * 2, kWords * 2, kReply), "write the reply");
            // A second import of the same pointer into a pool that is not the
            // exporter's: refused before the driver.
            auto local = MemoryPool::create(PoolProperties::device(0));
            if (ok(check, local, "a local pool")) {
                auto wrong = cudyn::import_pool_pointer(*local, *descriptor);
                check.expect(!wrong && wrong.error().code == ErrorCode::InvalidArgument,
                             "a pool that was not imported is refused");
            }
            // Freed by cuMemFreeAsync on the default stream, waited for, never
            // cuMemFree (compute-sanitizer's leak check did not see imports
            // freed with cuMemFree as freed).
            const auto reset = probe<PFN_fakecuda_reset_counts>("fakecuda_reset_counts");
            const auto count = probe<PFN_fakecuda_call_count>("fakecuda_call_count");
            if (!check.expect(reset && count, "the fake's probes")) return;
            reset();
            ok(check, memory->free(), "free the import");
            check.expect(memory->empty(), "the import is empty once freed");
            check.expect(count("cuCtxSynchronize") == 1 && count("cuMemFreeAsync") == 1 &&
                             count("cuStreamSynchronize") == 1 && count("cuMemFree_v2") == 0,
                         "a context wait, one cuMemFreeAsync and its wait, no cuMemFree");
        }
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole pool_consumer("pool-consumer", pool_consumer_role);

// The same, but the reply is written by stream work still pending when the
// import is freed in stream order on that stream: the free waits for
// nothing (no cuCtxSynchronize, no cuMemFree), and the write still lands,
// because the mapping goes only when the stream reaches the free.
int pool_stream_free_role(int, char**) {
    return run_role("pool-stream-free", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto pool = cudyn::receive_pool_fd(channel, kStep).and_then(cudyn::import_pool_fd);
        if (!ok(check, pool, "receive_pool_fd + import_pool_fd")) return;
        auto descriptor = receive_descriptor<PoolPointerDescriptor>(channel, kMemDescriptor);
        if (!ok(check, descriptor, "pointer descriptor")) return;
        auto event_descriptor = receive_descriptor<cudyn::IpcEventDescriptor>(channel, kEventDescriptor);
        if (!ok(check, event_descriptor, "event descriptor")) return;
        auto event = cudyn::import_ipc_event(*event_descriptor);
        if (!ok(check, event, "import_ipc_event")) return;
        auto stream = cudyn::Stream::create();
        if (!ok(check, stream, "a stream")) return;
        auto memory = cudyn::import_pool_pointer(*pool, *descriptor);
        if (!ok(check, memory, "import_pool_pointer")) return;
        ok(check, event->synchronize(), "wait for the exporter's fill");
        check.expect(!memory->stream_ordered(), "an import is freed synchronously until a stream is named");
        check.expect(cudyn::ledger::snapshot().of(cudyn::MemoryKind::PoolImported).live_bytes == memory->size_bytes(),
                     "the memory ledger counts the imported pointer");
        // No Catch assertions in a child: the fake's probes are reached directly.
        const auto delay = probe<PFN_fakecuda_set_stream_delay_us>("fakecuda_set_stream_delay_us");
        const auto reset = probe<PFN_fakecuda_reset_counts>("fakecuda_reset_counts");
        const auto count = probe<PFN_fakecuda_call_count>("fakecuda_call_count");
        if (!check.expect(delay && reset && count, "the fake's probes")) return;
        delay(50000);
        ok(check,
           cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, memory->device_address() + kWords * 2,
                              kReply, kWords / 2, stream->handle()),
           "enqueue the reply");
        reset();
        ok(check, memory->free(*stream), "free the import in stream order");
        check.expect(memory->empty(), "the import is empty once freed");
        check.expect(count("cuCtxSynchronize") == 0 && count("cuMemFree_v2") == 0 && count("cuMemFreeAsync") == 1,
                     "one cuMemFreeAsync, no context wait, no cuMemFree");
        const auto pending = stream->query();
        check.expect(pending.has_value() && !*pending, "the reply is still pending after the free returned");
        delay(200);
        ok(check, stream->synchronize(), "the stream reaches the free");
        const auto context_error = probe<PFN_fakecuda_context_error>("fakecuda_context_error");
        check.expect(context_error != nullptr && context_error(0) == 0, "the pending write found its memory");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole pool_stream_free("pool-stream-free", pool_stream_free_role);

// The exporter's side: fills a pool buffer, shares pool, pointer and event
// with `role`, and checks the reply in the second half.
void share_with(const char* role) {
    auto pool = take(MemoryPool::create(shareable()));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    auto event = take(cudyn::IpcEvent::create());
    require_ok(buffer.fill(kFirst, stream));
    require_ok(event.record(stream));
    auto exported = take(cudyn::export_pool_fd(pool));
    auto descriptor = take(cudyn::export_pool_pointer(pool, buffer));
    ParentSide side = start_child(role);
    require_ok(cudyn::send_descriptor(side.channel, exported, kStep));
    require_ok(exported.fd.close());
    require_ok(send_bytes(side.channel, kMemDescriptor, descriptor.to_bytes()));
    require_ok(send_bytes(side.channel, kEventDescriptor, take(cudyn::export_ipc_event(event)).to_bytes()));
    (void)take(side.channel.receive(kDone, kStep));
    CHECK(side.child.wait(kChildTimeout) == 0);
    std::vector<std::uint32_t> back(kWords);
    require_ok(buffer.copy_to(back));
    CHECK(std::vector<std::uint32_t>(back.begin() + kWords / 2, back.end()) ==
          std::vector<std::uint32_t>(kWords / 2, kReply));
    require_ok(buffer.free());
    require_ok(stream.synchronize());
}

}  // namespace

TEST_CASE("a pool and a pointer from it shared with another process, ordered by an interprocess event",
          "[emulated][cuda11][pool-ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        auto pool = take(MemoryPool::create(shareable()));
        auto stream = take(cudyn::Stream::create());
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
        auto event = take(cudyn::IpcEvent::create());
        {
            ScopedStreamDelay slow(20000);
            require_ok(buffer.fill(kFirst, stream));  // still pending when the child opens the memory
            require_ok(event.record(stream));
        }
        auto exported = take(cudyn::export_pool_fd(pool));
        CHECK(exported.info.origin == pool.origin());
        auto descriptor = take(cudyn::export_pool_pointer(pool, buffer));
        CHECK(descriptor.size_bytes() == kWords * 4);
        CHECK(descriptor.offset_bytes() == 0);

        ParentSide side = start_child("pool-consumer");
        require_ok(cudyn::send_descriptor(side.channel, exported, kStep));
        require_ok(exported.fd.close());
        require_ok(send_bytes(side.channel, kMemDescriptor, descriptor.to_bytes()));
        require_ok(send_bytes(side.channel, kEventDescriptor, take(cudyn::export_ipc_event(event)).to_bytes()));
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
        std::vector<std::uint32_t> back(kWords);
        require_ok(buffer.copy_to(back));
        CHECK(std::vector<std::uint32_t>(back.begin(), back.begin() + kWords / 2) ==
              std::vector<std::uint32_t>(kWords / 2, kFirst));
        CHECK(std::vector<std::uint32_t>(back.begin() + kWords / 2, back.end()) ==
              std::vector<std::uint32_t>(kWords / 2, kReply));
        require_ok(buffer.free());
        require_ok(stream.synchronize());
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("pool sharing refusals made before the driver", "[emulated][cuda11][pool-ipc]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    auto plain = take(MemoryPool::create(PoolProperties::device(0)));
    auto pool = take(MemoryPool::create(shareable()));
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
    auto other = take(StreamOrderedBuffer<std::uint32_t>::allocate(plain, 1024, stream));
    auto exported = take(cudyn::export_pool_fd(pool));  // its pointers export only after it
    DriverSnapshot untouched({"cuMemPoolExportToShareableHandle", "cuMemPoolImportFromShareableHandle",
                              "cuMemPoolExportPointer", "cuMemPoolImportPointer"});

    require_error(cudyn::export_pool_fd(plain), ErrorCode::InvalidArgument, "without the posix_fd handle type");
    require_error(cudyn::export_pool_fd(MemoryPool()), ErrorCode::InvalidArgument, "the pool is empty");
    require_error(cudyn::export_pool_pointer(plain, other), ErrorCode::InvalidArgument, "without a shareable handle type");
    require_error(cudyn::export_pool_pointer(pool, buffer.device_address(), 0), ErrorCode::InvalidArgument, "size of 0");
    require_error(cudyn::export_pool_pointer(pool, buffer.device_address(), 4097 * 4), ErrorCode::InvalidArgument,
                  "run past the allocation");
    untouched.require_untouched();
    // Memory of another pool: found by its attribute, refused before the export.
    require_error(cudyn::export_pool_pointer(pool, other.device_address(), 1024 * 4), ErrorCode::InvalidArgument,
                  "not allocated from this pool");
    CHECK(untouched.calls_since("cuMemPoolExportPointer") == 0);

    // What this process exported, it does not import.
    auto descriptor = take(cudyn::export_pool_pointer(pool, buffer));
    require_error(cudyn::import_pool_fd(std::move(exported)), ErrorCode::InvalidArgument, "exported by this process");
    require_error(cudyn::import_pool_pointer(pool, descriptor), ErrorCode::InvalidArgument, "exported by this process");
    CHECK(untouched.calls_since("cuMemPoolImportFromShareableHandle") == 0);
    CHECK(untouched.calls_since("cuMemPoolImportPointer") == 0);

    // Malformed records.
    auto bytes = descriptor.to_bytes();
    bytes[0] ^= 1;
    require_error(PoolPointerDescriptor::from_bytes(bytes.data(), bytes.size()), ErrorCode::InvalidArgument, "magic");
    bytes = descriptor.to_bytes();
    require_error(PoolPointerDescriptor::from_bytes(bytes.data(), bytes.size() - 1), ErrorCode::InvalidArgument,
                  "length");
    bytes[16 + 24 + 8] = 0xFF;  // the offset's low byte: past the allocation
    bytes[16 + 24 + 8 + 7] = 0x7F;
    require_error(PoolPointerDescriptor::from_bytes(bytes.data(), bytes.size()), ErrorCode::InvalidArgument,
                  "run past the allocation");
    auto info = cudyn::PoolInfo{};
    require_error(cudyn::PoolInfo::from_bytes(info.to_bytes().data(), info.to_bytes().size()),
                  ErrorCode::InvalidArgument, "exporter process id is 0");
    require_ok(buffer.free());
    require_ok(other.free());
    require_ok(stream.synchronize());
}

TEST_CASE("a pool pointer descriptor whose handle is all zero is refused, naming the field, like every record with a "
          "handle",
          "[emulated][cuda11][pool-ipc]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    auto pool = take(MemoryPool::create(shareable()));
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
    auto exported = take(cudyn::export_pool_fd(pool));
    const PoolPointerDescriptor descriptor = take(cudyn::export_pool_pointer(pool, buffer));
    auto bytes = descriptor.to_bytes();
    constexpr std::size_t kHandleAt = PoolPointerDescriptor::kSerializedSize - cudyn::PoolPointerHandle::kSize;
    std::fill(bytes.begin() + kHandleAt, bytes.end(), std::uint8_t{0});
    auto parsed = PoolPointerDescriptor::from_bytes(bytes.data(), bytes.size());
    require_error(parsed, ErrorCode::InvalidArgument, "PoolPointerDescriptor: the handle is all zero");
    // The same bytes with the handle back are a descriptor again.
    const auto good = descriptor.to_bytes();
    std::copy(good.begin() + kHandleAt, good.end(), bytes.begin() + kHandleAt);
    CHECK(take(PoolPointerDescriptor::from_bytes(bytes.data(), bytes.size())).handle() == descriptor.handle());
    require_ok(exported.fd.close());
    require_ok(buffer.free());
    require_ok(stream.synchronize());
}

TEST_CASE("a pointer before its pool: refused before the driver, naming the order; fine once the pool is exported",
          "[emulated][cuda11][pool-ipc]") {
    auto context = activate(0);
    auto stream = take(cudyn::Stream::create());
    auto pool = take(MemoryPool::create(shareable()));
    auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
    CHECK_FALSE(pool.exported());
    const FakeDriver& fake = FakeDriver::loaded();
    fake.record_calls(true);
    require_error(cudyn::export_pool_pointer(pool, buffer), ErrorCode::InvalidArgument,
                  "export the pool (export_pool_fd / export_pool_fabric) before its pointers");
    fake.record_calls(false);
    CHECK(fake.recorded_calls().empty());

    // A refused export leaves the pool unexported.
    {
        ScopedFault refused("cuMemPoolExportToShareableHandle:1:CUDA_ERROR_OUT_OF_MEMORY");
        CHECK_FALSE(cudyn::export_pool_fd(pool));
    }
    CHECK_FALSE(pool.exported());

    auto exported = take(cudyn::export_pool_fd(pool));
    CHECK(pool.exported());
    // The flag moves with the pool.
    MemoryPool moved = std::move(pool);
    CHECK(moved.exported());
    auto descriptor = take(cudyn::export_pool_pointer(moved, buffer));
    CHECK(descriptor.size_bytes() == 1024 * 4);
    require_ok(exported.fd.close());
    require_ok(buffer.free());
    require_ok(stream.synchronize());
}

TEST_CASE("a driver without pool entries: sharing says which entry is missing", "[legacy][pool-ipc]") {
    auto context = activate(0);
    // A descriptor as another process would send it (any open fd stands in).
    cudyn::PoolFdDescriptor received;
    received.fd = cudyn::FileDescriptor(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(received.fd.valid());
    received.info.origin = cudyn::PoolOrigin{1, 2, 3};
    require_error(cudyn::import_pool_fd(std::move(received)), ErrorCode::NotSupported,
                  "cuMemPoolImportFromShareableHandle");
    require_error(cudyn::export_pool_fd(MemoryPool()), ErrorCode::InvalidArgument, "the pool is empty");
}

namespace {

// Imports a fabric pool from its descriptor bytes and a pointer from it,
// checks the exporter's bytes and writes the reply.
int pool_fabric_consumer_role(int, char**) {
    return run_role("pool-fabric-consumer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto shared = receive_descriptor<cudyn::PoolFabricDescriptor>(channel, kRawBytes);
        if (!ok(check, shared, "pool fabric descriptor")) return;
        auto pool = cudyn::import_pool_fabric(*shared);
        if (!ok(check, pool, "import_pool_fabric")) return;
        auto descriptor = receive_descriptor<PoolPointerDescriptor>(channel, kMemDescriptor);
        if (!ok(check, descriptor, "pointer descriptor")) return;
        {
            auto memory = cudyn::import_pool_pointer(*pool, *descriptor);
            if (!ok(check, memory, "import_pool_pointer")) return;
            check.expect(same_words(memory->device_address(), kWords * 2, kFirst), "the exporter's bytes");
            ok(check, set_words(memory->device_address() + kWords * 2, kWords * 2, kReply), "write the reply");
            ok(check, memory->free(), "free the import");
        }
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole pool_fabric_consumer("pool-fabric-consumer", pool_fabric_consumer_role);

}  // namespace

namespace {

// Device 0's pools may take fabric handles for a scope, and so may a child's
// (the fake reads FAKECUDA_ATTR when it loads); then POSIX fds only again.
class FabricPools {
public:
    FabricPools() {
        const unsigned types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
        FakeDriver::loaded().set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, static_cast<int>(types));
        ::setenv("FAKECUDA_ATTR", ("119:" + std::to_string(types)).c_str(), 1);
    }
    ~FabricPools() {
        ::unsetenv("FAKECUDA_ATTR");
        FakeDriver::loaded().set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    }
    FabricPools(const FabricPools&) = delete;
    FabricPools& operator=(const FabricPools&) = delete;
};

const PoolProperties kFabricPool = PoolProperties::device(0).with_handle_types(HandleType::Fabric);

}  // namespace

TEST_CASE("a fabric pool: refused where the device lacks the type", "[emulated][pool-ipc]") {
    auto context = activate(0);
    {
        // A device whose pools take POSIX fds only.
        FakeDriver::loaded().set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                                           static_cast<int>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        DriverSnapshot untouched({"cuMemPoolCreate"});
        require_error(MemoryPool::create(kFabricPool), ErrorCode::NotSupported, "MEMPOOL_SUPPORTED_HANDLE_TYPES");
        untouched.require_untouched();
    }
    auto posix_only = take(MemoryPool::create(shareable()));
    require_error(cudyn::export_pool_fabric(posix_only), ErrorCode::InvalidArgument, "without the fabric handle type");
}

TEST_CASE("no IMEX channel (every machine measured): a fabric pool is created, never exported, and destroyed",
          "[emulated][pool-ipc]") {
    // The fake without a channel refuses a fabric pool's export and then
    // aborts in cuMemPoolDestroy of that pool, where driver 580 crashed: this
    // process getting through the destroy below is the test that the library
    // never tries the export here.
    auto context = activate(0);
    const FabricPools fabric_pools;
    const long pools = FakeDriver::loaded().live_pools();
    {
        auto pool = take(MemoryPool::create(kFabricPool));
        auto stream = take(cudyn::Stream::create());
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
        require_ok(buffer.fill(kFirst));
        DriverSnapshot untouched({"cuMemPoolExportToShareableHandle"});
        require_error(cudyn::export_pool_fabric(pool), ErrorCode::NotSupported, "does not share fabric handles");
        require_error(cudyn::export_pool_fabric(pool), ErrorCode::NotSupported, "IMEX");
        untouched.require_untouched();
        require_ok(buffer.free());
        require_ok(stream.synchronize());
        DriverSnapshot destroyed({"cuMemPoolDestroy"});
        require_ok(pool.destroy());
        CHECK(destroyed.calls_since("cuMemPoolDestroy") == 1);
    }
    CHECK(FakeDriver::loaded().live_pools() == pools);
}

TEST_CASE("modelled: with an IMEX channel a fabric pool is shared as bytes; a refused export leaves the pool "
          "undestroyed",
          "[emulated][pool-ipc][modelled]") {
    // No real machine measured had an IMEX channel: the success here is the
    // fake's model of fabric handles (its own handle bytes), not a measured one.
    const ScopedImexChannel imex;
    auto context = activate(0);
    const FabricPools fabric_pools;
    {
        auto pool = take(MemoryPool::create(kFabricPool));
        auto stream = take(cudyn::Stream::create());
        auto buffer = take(StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
        require_ok(buffer.fill(kFirst));
        auto shared = take(cudyn::export_pool_fabric(pool));
        const auto bytes = shared.to_bytes();
        const auto parsed = take(cudyn::PoolFabricDescriptor::from_bytes(bytes.data(), bytes.size()));
        CHECK(parsed.info().origin == pool.origin());
        CHECK(parsed.handle() == shared.handle());
        require_error(cudyn::import_pool_fabric(parsed), ErrorCode::InvalidArgument, "exported by this process");
        {
            // The probe says yes but the pool export is refused (an injected
            // refusal leaves the pool as a real one does: the fake aborts if
            // it is destroyed): NotSupported, and the pool is let go of
            // without cuMemPoolDestroy.
            auto doomed = take(MemoryPool::create(kFabricPool));
            {
                ScopedFault refused("cuMemPoolExportToShareableHandle:1:CUDA_ERROR_NOT_PERMITTED");
                require_error(cudyn::export_pool_fabric(doomed), ErrorCode::NotSupported, "IMEX");
            }
            DriverSnapshot untouched({"cuMemPoolDestroy"});
            require_ok(doomed.destroy());
            CHECK(doomed.empty());
            untouched.require_untouched();
        }

        ParentSide side = start_child("pool-fabric-consumer");
        require_ok(send_bytes(side.channel, kRawBytes, bytes));
        require_ok(send_bytes(side.channel, kMemDescriptor, take(cudyn::export_pool_pointer(pool, buffer)).to_bytes()));
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
        std::vector<std::uint32_t> back(kWords);
        require_ok(buffer.copy_to(back));
        CHECK(back[kWords / 2] == kReply);
        CHECK(back[0] == kFirst);
        require_ok(buffer.free());
        require_ok(stream.synchronize());
    }
}

TEST_CASE("an imported pool pointer freed in stream order on the importer's stream", "[emulated][cuda11][pool-ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    share_with("pool-stream-free");
    CHECK(before.live_delta() == 0);
}
