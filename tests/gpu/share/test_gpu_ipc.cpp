// gpu suite: inter-process sharing on the real driver. The test process is the
// producer; the consumer is this test binary started again in a child role
// (posix_spawn of /proc/self/exe: a fresh process, as CUDA needs — the driver
// does not survive fork() after initialisation). They share memory through a
// legacy IPC handle (cuMemAlloc memory) and through a POSIX descriptor (VMM
// memory, passed with SCM_RIGHTS), and an interprocess event orders them: the
// producer queues a memset and kPasses kernel passes on its stream and records
// the event; the consumer makes its own stream wait for the event (on the GPU,
// no polling), copies the bytes and checks that every pass landed, then writes
// a reply the producer reads back.
//
// Topics: [gpu][ipc] (both on GPU 0) and [gpu][ipc-multi-gpu] (the consumer's
// context on GPU 1; its Meson test sets CUDYN_TEST_REQUIRE_DEVICES=2, so it is
// skipped, exit 77, below two devices).
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/ipc_helpers.hpp"
#include "support/ptx_kernels.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/share/descriptor_transfer.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::IpcEvent;
using cudyn::IpcEventDescriptor;
using cudyn::IpcMemoryDescriptor;
using cudyn::Location;
using cudyn_test::ChildChecks;
using cudyn_test::PtxKernels;
using cudyn_test::require_ok;
using cudyn_test::take;
using namespace cudyn_test::ipc;  // tags, ok(), start_child(), send_tag(), receive_descriptor()

namespace {

// CUDA start-up in the child (cuInit, a context) takes a good part of a second;
// 64 passes over 64 MiB take milliseconds. Generous bounds, never a hang.
constexpr auto kGpuStep = std::chrono::seconds(60);
constexpr auto kGpuChildTimeout = std::chrono::seconds(120);
constexpr std::size_t kWords = std::size_t{16} << 20;  // 64 MiB
constexpr std::size_t kBytes = kWords * 4;
constexpr std::uint32_t kPasses = 64;
constexpr std::uint32_t kReply = 0xC0FFEE00u;

// The kernels. A driver that cannot load them fails the test: passes that
// each add 1 are what show the consumer waited for all of them (a pass that
// writes a constant would pass with only the last one seen).
PtxKernels load_kernels() {
    auto kernels = PtxKernels::load();
    INFO((kernels ? std::string() : kernels.error().describe()));
    REQUIRE(kernels.has_value());
    return std::move(*kernels);
}

// The producer's work on `stream`: zero, then kPasses kernel passes each adding
// 1, then the record. All asynchronous: nothing need be complete when this
// returns. The result is kPasses in every word.
void produce(const PtxKernels& kernels, CUdeviceptr data, const cudyn::Stream& stream, IpcEvent& event) {
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, data, 0u, kWords, stream.handle()));
    for (std::uint32_t pass = 0; pass < kPasses; ++pass) require_ok(kernels.add_u32(data, kWords, 1, stream.handle()));
    require_ok(event.record(stream));
}

// How many words of [data, data + bytes) differ from `value` (read on the legacy stream).
std::size_t mismatches(CUdeviceptr data, std::size_t bytes, std::uint32_t value) {
    const std::vector<std::uint32_t> words = cudyn_test::read32(data, bytes);
    std::size_t wrong = 0;
    for (std::uint32_t word : words) wrong += word != value ? 1 : 0;
    return wrong;
}

// ---- the consumer (child): argv = {"legacy" | "fd" | "pool" | "pool-stream", device ordinal} ----------------------------

int consumer_role(int argc, char** argv) {
    if (argc != 2) return 2;
    const std::string kind = argv[0];
    const int ordinal = std::atoi(argv[1]);
    return run_role("gpu-ipc-consumer", [&](ChildChecks& check, cudyn::FdChannel& channel) {
        auto event_descriptor = receive_descriptor<IpcEventDescriptor>(channel, kEventDescriptor, kGpuStep);
        if (!ok(check, event_descriptor, "event descriptor")) return;
        auto event = import_ipc_event(*event_descriptor);
        if (!ok(check, event, "IpcEvent::open")) return;

        // Declared in teardown order: the mapping goes before the memory and the range.
        std::optional<cudyn::ImportedIpcMemory> opened;
        std::optional<cudyn::AddressRange> range;
        std::optional<cudyn::PhysicalMemory> memory;
        std::optional<cudyn::MappedRange> mapping;
        std::optional<cudyn::MemoryPool> pool;
        std::optional<cudyn::ImportedPoolMemory> imported_pointer;
        CUdeviceptr data = 0;
        if (kind == "pool" || kind == "pool-stream") {
            auto received = cudyn::receive_pool_fd(channel, kGpuStep).and_then(cudyn::import_pool_fd);
            if (!ok(check, received, "receive_pool_fd + import_pool_fd")) return;
            pool = std::move(*received);
            auto descriptor = receive_descriptor<cudyn::PoolPointerDescriptor>(channel, kMemDescriptor, kGpuStep);
            if (!ok(check, descriptor, "pool pointer descriptor")) return;
            auto imported = cudyn::import_pool_pointer(*pool, *descriptor);
            if (!ok(check, imported, "import_pool_pointer")) return;
            check.expect(imported->size_bytes() == kBytes, "the shared size came along");
            imported_pointer = std::move(*imported);
            data = imported_pointer->device_address();
        } else if (kind == "legacy") {
            auto descriptor = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor, kGpuStep);
            if (!ok(check, descriptor, "memory descriptor")) return;
            auto opened_now = cudyn::import_ipc_memory(*descriptor);
            if (!ok(check, opened_now, "ImportedIpcMemory::open")) return;
            check.expect(opened_now->size_bytes() == kBytes, "the shared size came along");
            opened = std::move(*opened_now);
            data = opened->device_address();
        } else {
            auto received = cudyn::receive_memory_fd(channel, kGpuStep);
            if (!ok(check, received, "receive_memory_fd")) return;
            auto imported = cudyn::import_memory_fd(std::move(*received));
            if (!ok(check, imported, "import_memory_fd")) return;
            auto reserved = cudyn::AddressRange::reserve(imported->size_bytes());
            if (!ok(check, reserved, "reserve")) return;
            auto mapped = cudyn::MappedRange::map(*reserved, 0, *imported,
                                                  {{Location::device(ordinal), AccessFlags::ReadWrite}});
            if (!ok(check, mapped, "map for device " + std::to_string(ordinal))) return;
            memory = std::move(*imported);
            range = std::move(*reserved);
            mapping = std::move(*mapped);
            data = mapping->device_address();
        }
        auto stream = cudyn::Stream::create();
        if (!ok(check, stream, "stream")) return;
        if (!ok(check, send_tag(channel, kWaiting, kGpuStep), "send 'ready'")) return;
        if (!ok(check, channel.receive(kRecorded, kGpuStep), "'recorded'")) return;

        // The stream waits on the GPU for the producer's passes; the copy follows them.
        ok(check, event->wait(*stream), "wait");
        std::vector<std::uint32_t> host(kWords);
        ok(check, cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoHAsync_v3020, host.data(), data, kBytes,
                                     stream->handle()),
           "copy after the wait");
        ok(check, stream->synchronize(), "synchronize");
        std::size_t wrong = 0;
        for (std::uint32_t word : host) wrong += word != kPasses ? 1 : 0;
        check.expect(wrong == 0, std::to_string(wrong) + " words had not seen all " + std::to_string(kPasses) +
                                     " passes: the wait did not order the copy after the producer's work");
        ok(check, cudyn::call_driver(&cudyn::DriverTable::cuMemsetD32Async_v3020, data + kBytes / 2, kReply,
                                     kWords / 2, stream->handle()),
           "write the reply");
        if (kind == "pool-stream") {
            // Freed in stream order right behind the reply, without waiting:
            // the mapping goes when the stream reaches the free.
            ok(check, imported_pointer->free(*stream), "free the import in stream order");
            check.expect(imported_pointer->empty(), "the import is empty once freed");
        }
        ok(check, stream->synchronize(), "synchronize the reply");
        ok(check, cudyn::call_driver(&cudyn::DriverTable::cuCtxSynchronize_v2000), "the context is healthy");
        // An imported pool pointer is freed before the exporter frees the allocation.
        if (imported_pointer && !imported_pointer->empty())
            ok(check, imported_pointer->free(), "free the imported pool pointer");
        ok(check, send_tag(channel, kDone, kGpuStep), "send 'done'");
        mapping.reset();
        if (opened) ok(check, opened->close(), "close the memory");
    }, ordinal);
}
const cudyn_test::ChildRole consumer("gpu-ipc-consumer", consumer_role);

// ---- the producer (the test) ----------------------------------------------------------------------

void require_devices(int consumer_device) {
    const int count = take(cudyn::Device::count());
    INFO("the consumer's device " << consumer_device << " of " << count);
    REQUIRE(consumer_device < count);
    if (consumer_device != 0) {
        const auto consumer = take(cudyn::Device::get(consumer_device));
        INFO("device " << consumer_device << " cannot access device 0's memory (no peer path)");
        REQUIRE(take(consumer.can_access_peer(take(cudyn::Device::get(0)))));
    }
}

// The producer's half once the consumer has the handles: work, record, tell;
// then the consumer's reply, seen here.
void exchange(ParentSide& side, const PtxKernels& kernels, CUdeviceptr data, const cudyn::Stream& stream,
              IpcEvent& event) {
    (void)take(side.channel.receive(kWaiting, kGpuStep));
    produce(kernels, data, stream, event);
    require_ok(send_tag(side.channel, kRecorded, kGpuStep));
    (void)take(side.channel.receive(kDone, kGpuStep));
    CHECK(side.child.wait(kGpuChildTimeout) == 0);
    require_ok(stream.synchronize());
    CHECK(mismatches(data, kBytes / 2, kPasses) == 0);
    CHECK(mismatches(data + kBytes / 2, kBytes / 2, kReply) == 0);
}

// cuMemAlloc memory, shared through a legacy handle.
void share_legacy(int consumer_device) {
    require_devices(consumer_device);
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto kernels = load_kernels();
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    auto stream = take(cudyn::Stream::create());
    auto event = take(IpcEvent::create());
    const auto shared = take(export_ipc_memory(buffer));

    ParentSide side = start_child("gpu-ipc-consumer", {"legacy", std::to_string(consumer_device)});
    require_ok(send_bytes(side.channel, kEventDescriptor, take(export_ipc_event(event)).to_bytes()));
    require_ok(send_bytes(side.channel, kMemDescriptor, shared.to_bytes()));
    exchange(side, kernels, buffer.device_address(), stream, event);
}

// VMM memory created with the POSIX-descriptor handle type, passed with SCM_RIGHTS.
void share_posix_fd(int consumer_device) {
    require_devices(consumer_device);
    auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    INFO("device 0 reports no VMM or no POSIX-descriptor handles");
    REQUIRE((caps.virtual_memory_management && caps.posix_fd_handles));
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto kernels = load_kernels();
    const auto props =
        cudyn::AllocationProperties::device(0).with_handle_types(cudyn::HandleType::PosixFileDescriptor);
    const std::size_t granularity = take(cudyn::allocation_granularity(props));
    const std::size_t size = (kBytes + granularity - 1) / granularity * granularity;
    auto range = take(cudyn::AddressRange::reserve(size));
    auto memory = take(cudyn::PhysicalMemory::create(props, size));
    auto mapping =
        take(cudyn::MappedRange::map(range, 0, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
    auto stream = take(cudyn::Stream::create());
    auto event = take(IpcEvent::create());
    auto exported = take(cudyn::export_memory_fd(memory));

    ParentSide side = start_child("gpu-ipc-consumer", {"fd", std::to_string(consumer_device)});
    require_ok(send_bytes(side.channel, kEventDescriptor, take(export_ipc_event(event)).to_bytes()));
    require_ok(cudyn::send_descriptor(side.channel, exported, kGpuStep));
    require_ok(exported.fd.close());
    exchange(side, kernels, mapping.device_address(), stream, event);
}

// Memory from a shareable pool: the pool passed as a POSIX fd, the pointer as
// a descriptor; the producer's passes run on the allocating stream.
void share_pool(int consumer_device, const char* kind = "pool") {
    require_devices(consumer_device);
    auto caps = take(cudyn::probe_capabilities(take(cudyn::Device::get(0))));
    INFO("device 0 reports no memory pools");
    REQUIRE(caps.memory_pools);
    auto context = take(cudyn::PrimaryContext::activate(take(cudyn::Device::get(0))));
    const auto kernels = load_kernels();
    auto pool = take(cudyn::MemoryPool::create(
        cudyn::PoolProperties::device(0).with_handle_types(cudyn::HandleType::PosixFileDescriptor)));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kWords, stream));
    require_ok(stream.synchronize());  // the allocation is complete before the peer imports it
    auto event = take(IpcEvent::create());
    auto exported = take(cudyn::export_pool_fd(pool));
    const auto shared = take(cudyn::export_pool_pointer(pool, buffer));

    ParentSide side = start_child("gpu-ipc-consumer", {kind, std::to_string(consumer_device)});
    require_ok(send_bytes(side.channel, kEventDescriptor, take(export_ipc_event(event)).to_bytes()));
    require_ok(cudyn::send_descriptor(side.channel, exported, kGpuStep));
    require_ok(exported.fd.close());
    require_ok(send_bytes(side.channel, kMemDescriptor, shared.to_bytes()));
    buffer.use_on(stream);
    exchange(side, kernels, buffer.device_address(), stream, event);
    require_ok(buffer.free());  // after the consumer freed its import
}

}  // namespace

TEST_CASE("two processes on one GPU share a memory pool and a pointer from it; an IPC event orders them",
          "[gpu][pool]") {
    share_pool(0);
}

TEST_CASE("the importer frees a pool pointer in stream order, right behind its last write", "[gpu][pool]") {
    share_pool(0, "pool-stream");
}

TEST_CASE("two processes on one GPU share cuMemAlloc memory; an IPC event orders them", "[gpu][ipc]") {
    share_legacy(0);
}

TEST_CASE("two processes on one GPU share VMM memory through a POSIX fd; an IPC event orders them",
          "[gpu][ipc]") {
    share_posix_fd(0);
}

TEST_CASE("the consumer's context on GPU 1 opens GPU 0's legacy handle and waits on its event",
          "[gpu][ipc-multi-gpu]") {
    share_legacy(1);
}

TEST_CASE("the consumer's context on GPU 1 maps GPU 0's VMM memory from a POSIX fd", "[gpu][ipc-multi-gpu]") {
    share_posix_fd(1);
}

// Fabric handles need an IMEX channel and service besides the device
// attribute. Whatever this machine has, the probe must answer (not fail), and
// the real export path must agree with it: a handle that imports where the
// probe said yes, NotSupported naming IMEX where it said no.
TEST_CASE("fabric handles: the probe's answer holds for a real export", "[gpu][ipc]") {
    const auto device = take(cudyn::Device::get(0));
    auto context = take(cudyn::PrimaryContext::activate(device));
    const bool supported = take(cudyn::probe_fabric_support(device));
    const bool attribute = take(cudyn::probe_capabilities(device)).fabric_handles;
    INFO("device 0: HANDLE_TYPE_FABRIC_SUPPORTED " << attribute << ", probe_fabric_support " << supported);
    if (!attribute) {
        CHECK_FALSE(supported);
        return;
    }
    const auto properties = cudyn::AllocationProperties::device(0).with_handle_types(cudyn::HandleType::Fabric);
    const std::size_t size = take(cudyn::allocation_granularity(properties));
    auto memory = cudyn::PhysicalMemory::create(properties, size);
    if (supported) {
        REQUIRE(memory.has_value());
        auto descriptor = take(cudyn::export_memory_fabric(*memory));
        auto imported = take(cudyn::import_memory_fabric(descriptor));
        CHECK(imported.size_bytes() == size);
        return;
    }
    // No fabric here: the refusal comes at creation or at export, as NotSupported.
    cudyn::Error refusal = memory ? cudyn::Error{} : memory.error();
    if (memory) {
        auto exported = cudyn::export_memory_fabric(*memory);
        REQUIRE_FALSE(exported.has_value());  // the probe said no: the real export must not succeed either
        refusal = exported.error();
    }
    INFO("the driver refused with " << refusal.describe());
    CHECK(refusal.code == cudyn::ErrorCode::NotSupported);
    CHECK(refusal.message.find("IMEX") != std::string::npos);
}
