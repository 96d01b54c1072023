// Sharing any allocation from its address ([share-any]): export_allocation
// finds the kind (cuMemAlloc, VMM, pool memory), the offset and the handle;
// one channel message carries it; a second process imports it with
// import_allocation, knowing nothing of the kind, and reads and writes the
// exporter's bytes. Memory that has no inter-process handle is NotSupported
// naming why, an address that is not GPU memory InvalidArgument; malformed
// messages are refused; descriptors reach a process in another PID namespace
// (with a /proc of its own), where the exporter's pid names nothing.
//
// Runs on every fake that emulates memory: legacy (10.1) shares cuMemAlloc
// memory only (no VMM, no pools), cuda11 (11.8) has no fabric handles.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/share_any_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::AllocationDescriptor;
using cudyn::AllocationKind;
using cudyn_test::ChildChecks;
using namespace cudyn_test;  // activate, take, require_ok, require_error, read_device, kMiB, FakeDriver
using namespace cudyn_test::ipc;
using cudyn_test::share_any::Expected;

namespace {

constexpr std::size_t kGranule = 2 * kMiB;
constexpr std::uint32_t kNamespaces = 40;  // the namespaced consumer says where it runs

bool variant_is(const char* name) { return FakeDriver::loaded().variant() == name; }
bool has_vmm() { return !variant_is("legacy"); }

// ---- the consumers: whatever was exported, imported the same way -----------------------------------

int consumer_role(int, char**) {
    return run_role("share-any-consumer",
                    [](ChildChecks& check, cudyn::FdChannel& channel) { share_any::consume(check, channel, kStep); });
}
const cudyn_test::ChildRole consumer("share-any-consumer", consumer_role);

// Pid 1 of a new PID namespace with a mount namespace of its own: a /proc of
// that namespace replaces the inherited one, so no pid of the exporter's
// namespace is visible here. Then the consumer, which must need no pid.
int namespaced_consumer_role(int argc, char** argv) {
    const bool isolated = argc == 1 && std::string(argv[0]) == "isolated";
    if (isolated && (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                     ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)) {
        std::fprintf(stderr, "[child share-any-namespaced] mount a /proc of its own: %s\n", std::strerror(errno));
        return 1;
    }
    return run_role("share-any-namespaced", [isolated](ChildChecks& check, cudyn::FdChannel& channel) {
        const std::uint32_t where = isolated ? 1u : 0u;
        ok(check, channel.send(kNamespaces, &where, sizeof where, -1, kStep), "say where it runs");
        if (isolated) check.expect(::getpid() == 1, "pid 1 of its own PID namespace");
        share_any::consume(check, channel, kStep, [&](const AllocationDescriptor& descriptor) {
            if (!isolated) return;
            const std::string exporter = "/proc/" + std::to_string(descriptor.exporter_pid());
            check.expect(::access(exporter.c_str(), F_OK) != 0, "the exporter's pid names no process here");
        });
    });
}
const cudyn_test::ChildRole namespaced_consumer("share-any-namespaced", namespaced_consumer_role);

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream file(path);
    file << text;
    file.flush();
    return static_cast<bool>(file);
}

// Enters new user, PID and mount namespaces (root inside mapped to this
// user), then starts the consumer, which is pid 1 there. Where the kernel
// refuses namespaces (a container without user namespaces), the consumer
// runs here instead and says so.
int namespace_launcher_role(int, char**) {
    const std::string uid = std::to_string(::getuid());
    const std::string gid = std::to_string(::getgid());
    bool isolated = ::unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) == 0;
    if (isolated)
        isolated = write_file("/proc/self/setgroups", "deny") && write_file("/proc/self/uid_map", "0 " + uid + " 1") &&
                   write_file("/proc/self/gid_map", "0 " + gid + " 1");
    if (!isolated) std::fprintf(stderr, "[child share-any-launcher] no namespaces here: %s\n", std::strerror(errno));
    // LeakSanitizer (the sanitizer build) cannot stop the world from inside
    // a new user or PID namespace and aborts at exit: the consumer runs
    // without its leak check, and this launcher leaves without atexit
    // handlers. Leaks are checked by every other process of the suite.
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string options = std::string(asan ? asan : "") + (asan && *asan ? ":" : "") + "detect_leaks=0";
    ::setenv("ASAN_OPTIONS", options.c_str(), 1);
    ChildProcess child = ChildProcess::spawn("share-any-namespaced", {isolated ? "isolated" : "shared"},
                                             kChildChannelFd);
    const int status = child.wait(kChildTimeout);
    std::fflush(nullptr);
    std::_Exit(status);
}
const cudyn_test::ChildRole namespace_launcher("share-any-launcher", namespace_launcher_role);

// Imports pool memory, then asks to export what it imported: NotSupported,
// naming why, before the driver is asked to export the imported pool.
int reexporter_role(int, char**) {
    return run_role("share-any-reexporter", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto descriptor = cudyn::receive_allocation(channel, kStep);
        if (!ok(check, descriptor, "receive_allocation")) return;
        auto imported = cudyn::import_allocation(*descriptor);
        if (!ok(check, imported, "import_allocation")) return;
        auto calls = probe<PFN_fakecuda_call_count>("fakecuda_call_count");
        if (!check.expect(calls != nullptr, "fakecuda_call_count")) return;
        const long pool_exports = calls("cuMemPoolExportToShareableHandle");
        const long pointer_exports = calls("cuMemPoolExportPointer");
        auto again = cudyn::export_allocation(imported->device_address(), imported->size_bytes());
        check.expect(!again && again.error().code == ErrorCode::NotSupported &&
                         again.error().message.find("imported from another process") != std::string::npos,
                     "exporting imported pool memory is NotSupported, naming why: " +
                         (again ? std::string("it was exported") : describe(again.error())));
        check.expect(calls("cuMemPoolExportToShareableHandle") == pool_exports &&
                         calls("cuMemPoolExportPointer") == pointer_exports,
                     "the driver was not asked to export the imported pool or pointer");
        ok(check, imported->close(), "close");
        ok(check, send_tag(channel, kDone, kStep), "send 'done'");
    });
}
const cudyn_test::ChildRole reexporter("share-any-reexporter", reexporter_role);

// ---- the exporter's side ----------------------------------------------------------------------------

void export_to_consumer(CUdeviceptr base, CUdeviceptr part, std::size_t bytes, const Expected& expected) {
    share_any::export_to_consumer(base, part, bytes, expected, share_any::Exchange("share-any-consumer"));
}

// The consumer in namespaces of its own (or here, where the kernel refuses them: a warning).
void export_to_namespaced_consumer(CUdeviceptr base, CUdeviceptr part, std::size_t bytes, const Expected& expected) {
    share_any::Exchange exchange("share-any-launcher");
    exchange.before_send = [](ParentSide& side) {
        auto where = take(side.channel.receive(kNamespaces, kStep));
        std::uint32_t isolated = 0;
        REQUIRE(where.payload.size() == sizeof isolated);
        std::memcpy(&isolated, where.payload.data(), sizeof isolated);
        if (isolated == 0) WARN("no user namespaces here: the consumer ran in this PID namespace");
    };
    share_any::export_to_consumer(base, part, bytes, expected, exchange);
}

// Four granules reserved, two of POSIX-fd (or `types`) memory mapped at the second.
struct VmmMemory {
    cudyn::AddressRange range;
    cudyn::MappedRange mapping;
    explicit VmmMemory(HandleType types) {
        range = take(cudyn::AddressRange::reserve(4 * kGranule));
        auto memory =
            take(cudyn::PhysicalMemory::create(AllocationProperties::device(0).with_handle_types(types), 2 * kGranule));
        mapping = take(cudyn::MappedRange::map(range, kGranule, memory, {{Location::device(0), AccessFlags::ReadWrite}}));
    }
};

cudyn::PoolProperties shareable_pool(HandleType types = HandleType::PosixFileDescriptor) {
    return cudyn::PoolProperties::device(0).with_handle_types(types);
}

}  // namespace

TEST_CASE("cuMemAlloc memory, exported from an address inside it, imported by a process that does not know the kind",
          "[emulated][cuda11][legacy][share-any]") {
    auto context = activate(0);
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kMiB / 4));
    export_to_consumer(buffer.device_address(), buffer.device_address() + 4096, 64 * 1024,
                        {AllocationKind::LegacyIpc, HandleType::None, kMiB});
}

TEST_CASE("VMM memory, exported from an address inside its mapping (the reservation is larger), as a POSIX descriptor",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    const VmmMemory vmm(HandleType::PosixFileDescriptor);
    const CUdeviceptr base = vmm.mapping.device_address();
    export_to_consumer(base, base + kGranule + 4096, kMiB, {AllocationKind::Vmm, HandleType::PosixFileDescriptor, 2 * kGranule});
}

TEST_CASE("modelled: with an IMEX channel, VMM memory with both handle types goes as a POSIX descriptor; with only "
          "the fabric type, as a fabric handle",
          "[emulated][share-any][modelled]") {
    // No real machine measured had an IMEX channel (fabric memory was refused
    // at creation): the fabric success is the fake's model.
    const ScopedImexChannel imex;
    auto context = activate(0);
    {
        const VmmMemory both(HandleType::PosixFileDescriptor | HandleType::Fabric);
        const AllocationDescriptor descriptor = take(cudyn::export_allocation(both.mapping.device_address(), 4096));
        CHECK(descriptor.handle_type() == HandleType::PosixFileDescriptor);
    }
    const VmmMemory fabric(HandleType::Fabric);
    const CUdeviceptr base = fabric.mapping.device_address();
    export_to_consumer(base, base + 64, 8192, {AllocationKind::Vmm, HandleType::Fabric, 2 * kGranule});
    // Where the trial export is refused (the probe says no): NotSupported.
    {
        ScopedFault refused("cuMemExportToShareableHandle:1+:CUDA_ERROR_NOT_PERMITTED");
        require_error(cudyn::export_allocation(base, 4096), ErrorCode::NotSupported, "only the fabric handle type");
    }
    // And where the channel is gone (the probe's trial creation refused).
    FakeDriver::loaded().set_imex_channel(false);
    require_error(cudyn::export_allocation(base, 4096), ErrorCode::NotSupported, "only the fabric handle type");
}

TEST_CASE("pool memory from a shareable pool, exported from an address inside the allocation, travels with its pool",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    auto pool = take(cudyn::MemoryPool::create(shareable_pool()));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
    require_ok(stream.synchronize());  // allocated before the consumer uses it
    export_to_consumer(buffer.device_address(), buffer.device_address() + 64, 128 * 1024,
                        {AllocationKind::Pool, HandleType::PosixFileDescriptor, kMiB});
    require_ok(buffer.free());  // after the consumer freed its import
    require_ok(stream.synchronize());
}

TEST_CASE("modelled: with an IMEX channel, pool memory from a fabric-only pool travels with the pool as a fabric "
          "handle",
          "[emulated][share-any][modelled]") {
    // No real machine measured had an IMEX channel: the fabric success is the
    // fake's model (its own handle bytes).
    const ScopedImexChannel imex;
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    // This device may share pools as fabric handles; so may the consumer's
    // (the fake reads FAKECUDA_ATTR when it loads).
    const unsigned types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, static_cast<int>(types));
    ::setenv("FAKECUDA_ATTR", ("119:" + std::to_string(types)).c_str(), 1);
    {
        auto pool = take(cudyn::MemoryPool::create(shareable_pool(HandleType::Fabric)));
        auto stream = take(cudyn::Stream::create());
        auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
        require_ok(stream.synchronize());
        export_to_consumer(buffer.device_address(), buffer.device_address(), kMiB,
                            {AllocationKind::Pool, HandleType::Fabric, kMiB});
        require_ok(buffer.free());
        require_ok(stream.synchronize());
    }
    ::unsetenv("FAKECUDA_ATTR");
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

TEST_CASE("no IMEX channel (every machine measured): pool memory from a fabric-only pool is NotSupported, and the "
          "pool is destroyed as usual",
          "[emulated][share-any]") {
    // The fake refuses a fabric pool's export here and aborts in
    // cuMemPoolDestroy of such a pool, where driver 580 crashed: getting
    // through the destroy is the test that export_allocation never tried it.
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                       static_cast<int>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC));
    {
        auto pool = take(cudyn::MemoryPool::create(shareable_pool(HandleType::Fabric)));
        auto stream = take(cudyn::Stream::create());
        auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
        require_ok(stream.synchronize());
        const DriverSnapshot untouched({"cuMemPoolExportToShareableHandle"});
        require_error(cudyn::export_allocation(buffer.device_address(), 4096), ErrorCode::NotSupported, "IMEX");
        untouched.require_untouched();
        require_ok(buffer.free());
        require_ok(stream.synchronize());
        const DriverSnapshot destroyed({"cuMemPoolDestroy"});
        require_ok(pool.destroy());
        CHECK(destroyed.calls_since("cuMemPoolDestroy") == 1);
    }
    fake.set_attribute(0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

TEST_CASE("export_allocation(address) exports to the end of the allocation, or of the VMM mapping",
          "[emulated][cuda11][legacy][share-any]") {
    auto context = activate(0);
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kMiB / 4));
    auto legacy = take(cudyn::export_allocation(buffer.device_address() + 4096));
    CHECK(legacy.offset_bytes() == 4096);
    CHECK(legacy.size_bytes() == kMiB - 4096);
    if (!has_vmm()) return;
    const VmmMemory vmm(HandleType::PosixFileDescriptor);
    auto mapped = take(cudyn::export_allocation(vmm.mapping.device_address() + kGranule));
    CHECK(mapped.offset_bytes() == kGranule);
    CHECK(mapped.size_bytes() == kGranule);  // the mapping ends there, not the reservation
    auto pool = take(cudyn::MemoryPool::create(shareable_pool()));
    auto stream = take(cudyn::Stream::create());
    auto from_pool = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1000, stream));
    auto pooled = take(cudyn::export_allocation(from_pool.device_address() + 256));
    CHECK(pooled.offset_bytes() == 256);
    CHECK(pooled.size_bytes() == 4000 - 256);
    require_ok(from_pool.free());
    require_ok(stream.synchronize());
}

TEST_CASE("what has no inter-process handle is NotSupported naming why, what is not GPU memory InvalidArgument, "
          "bad arguments InvalidArgument before the driver; nothing is left behind",
          "[emulated][cuda11][legacy][share-any]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    {
        DriverSnapshot untouched({"cuPointerGetAttributes", "cuPointerGetAttribute"});
        require_error(cudyn::export_allocation(0, 64), ErrorCode::InvalidArgument, "address is null");
        require_error(cudyn::export_allocation(0x10000, 0), ErrorCode::InvalidArgument, "non-zero");
        require_error(cudyn::export_allocation(~CUdeviceptr{0} - 10, 64), ErrorCode::InvalidArgument, "wraps");
        untouched.require_untouched();
    }
    const long live = fake.live_allocations();
    auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(1024));
    require_error(cudyn::export_allocation(reinterpret_cast<std::uintptr_t>(pinned.data()) + 64, 64),
                  ErrorCode::NotSupported, "host memory");
    auto mapped = take(cudyn::ZeroCopyBuffer<std::uint32_t>::allocate(1024));
    require_error(cudyn::export_allocation(mapped.device_address(), 64), ErrorCode::NotSupported, "host memory");
    std::vector<std::uint32_t> host(4096);
    auto registration = take(cudyn::HostRegistration::register_memory(host.data(), host.size() * 4));
    require_error(cudyn::export_allocation(reinterpret_cast<std::uintptr_t>(host.data()) + 4096, 64),
                  ErrorCode::NotSupported, "cuMemHostRegister");
    auto managed = take(cudyn::ManagedBuffer<std::uint32_t>::allocate(1024));
    require_error(cudyn::export_allocation(managed.device_address(), 64), ErrorCode::NotSupported, "managed memory");
    std::vector<std::uint32_t> plain(1024);
    require_error(cudyn::export_allocation(reinterpret_cast<std::uintptr_t>(plain.data()), 64),
                  ErrorCode::InvalidArgument, "not GPU memory");
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
    require_error(cudyn::export_allocation(buffer.device_address() + 4000, 200), ErrorCode::InvalidArgument,
                  "past the allocation");
    CHECK(fake.live_allocations() == live + 5);  // the five above, nothing more

    if (!has_vmm()) return;
    const unsigned long long bytes_before =
        probe<PFN_fakecuda_device_bytes_in_use>("fakecuda_device_bytes_in_use")(0);
    {
        const VmmMemory plain_vmm(HandleType::None);
        const long with_vmm = fake.live_allocations();
        require_error(cudyn::export_allocation(plain_vmm.mapping.device_address() + 64, 64), ErrorCode::NotSupported,
                      "without a shareable handle type");
        CHECK(fake.live_allocations() == with_vmm);  // the retained handle was given back
        // Reserved around the mapping, nothing mapped there: the driver does not know it.
        require_error(cudyn::export_allocation(plain_vmm.range.device_address() + 64, 64), ErrorCode::InvalidArgument,
                      "not GPU memory");
        // VMM memory goes one mapping at a time.
        const VmmMemory fd_vmm(HandleType::PosixFileDescriptor);
        require_error(cudyn::export_allocation(fd_vmm.mapping.device_address() + kGranule, kGranule + 4096),
                      ErrorCode::InvalidArgument, "one mapping");
        auto growable = take(cudyn::GrowableBuffer::create(
            AllocationProperties::device(0).with_handle_types(HandleType::PosixFileDescriptor), 4 * kGranule));
        require_ok(growable.grow_to(2 * kGranule));
        require_error(cudyn::export_allocation(growable.device_address(), 2 * kGranule), ErrorCode::InvalidArgument,
                      "one mapping");
        CHECK(take(cudyn::export_allocation(growable.device_address() + kGranule, kGranule)).size_bytes() == kGranule);
    }
    CHECK(probe<PFN_fakecuda_device_bytes_in_use>("fakecuda_device_bytes_in_use")(0) == bytes_before);

    auto stream = take(cudyn::Stream::create());
    auto from_default = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(1024, stream));
    require_error(cudyn::export_allocation(from_default.device_address(), 64), ErrorCode::NotSupported,
                  "pool created without a shareable handle type");
    auto unshareable = take(cudyn::MemoryPool::create(cudyn::PoolProperties::device(0)));
    auto from_pool = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(unshareable, 1024, stream));
    require_error(cudyn::export_allocation(from_pool.device_address(), 64), ErrorCode::NotSupported,
                  "pool created without a shareable handle type");
    require_ok(from_pool.free());
    require_ok(from_default.free());
    require_ok(stream.synchronize());
}

TEST_CASE("receive_allocation: the record's bytes, and malformed messages refused with nothing left open",
          "[emulated][cuda11][legacy][share-any]") {
    auto context = activate(0);
    auto ends = take(cudyn::FdChannel::pair());
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
    const AllocationDescriptor descriptor = take(cudyn::export_allocation(buffer.device_address() + 256, 512));
    require_ok(cudyn::send_descriptor(ends.first, descriptor));
    const std::vector<std::uint8_t> good = take(ends.second.receive(cudyn::kAllocationMessageTag)).payload;

    // The layout: a 64-byte record (magic, version 1, length 64, kind,
    // handle type, exporter pid and token, allocation size, offset, size),
    // then the kind's own record.
    const auto u32_at = [&](std::size_t at) {
        std::uint32_t value = 0;
        for (int i = 3; i >= 0; --i) value = (value << 8) | good[at + static_cast<std::size_t>(i)];
        return value;
    };
    const auto u64_at = [&](std::size_t at) {
        return static_cast<std::uint64_t>(u32_at(at)) | (static_cast<std::uint64_t>(u32_at(at + 4)) << 32);
    };
    REQUIRE(good.size() == 64 + cudyn::IpcMemoryDescriptor::kSerializedSize);
    CHECK(std::string(good.begin(), good.begin() + 8) == "CUDYNSAL");
    CHECK((good[8] | good[9] << 8) == 1);
    CHECK((good[10] | good[11] << 8) == 64);
    CHECK(u32_at(16) == static_cast<std::uint32_t>(AllocationKind::LegacyIpc));
    CHECK(u32_at(20) == 0);
    CHECK(u64_at(24) == descriptor.exporter_pid());
    CHECK(u64_at(40) == 4096);
    CHECK(u64_at(48) == 256);
    CHECK(u64_at(56) == 512);
    CHECK(std::string(good.begin() + 64, good.begin() + 72) == "CUDYNIPM");

    // The same message back: received here, it is still this process's own.
    require_ok(ends.first.send(cudyn::kAllocationMessageTag, good.data(), good.size()));
    const AllocationDescriptor back = take(cudyn::receive_allocation(ends.second));
    CHECK(back.kind() == AllocationKind::LegacyIpc);
    CHECK(back.offset_bytes() == 256);
    CHECK(back.exported_by_this_process());
    require_error(cudyn::import_allocation(back), ErrorCode::InvalidArgument, "exported by this process");

    const long descriptors = open_descriptors();
    const auto refused = [&](std::vector<std::uint8_t> bytes, const std::string& mentions, int fd = -1,
                             std::uint32_t tag = cudyn::kAllocationMessageTag) {
        INFO("expected: " << mentions);
        require_ok(ends.first.send(tag, bytes.data(), bytes.size(), fd));
        require_error(cudyn::receive_allocation(ends.second), ErrorCode::InvalidArgument, mentions);
    };
    const auto changed = [&](std::size_t at, std::uint8_t value) {
        std::vector<std::uint8_t> bytes = good;
        bytes[at] = value;
        return bytes;
    };
    refused(good, "tag", -1, 0x1234);
    refused(std::vector<std::uint8_t>(good.begin(), good.begin() + 40), "shorter than the 64-byte");
    refused(changed(0, 'X'), "magic");
    refused(changed(8, 2), "version 2");
    refused(changed(10, 65), "length");
    refused(changed(16, 9), "kind 9");
    refused(changed(20, 1), "handle type 1");  // a legacy handle has no handle type
    const auto zeroed = [&](std::size_t at, std::size_t width) {
        std::vector<std::uint8_t> bytes = good;
        std::memset(bytes.data() + at, 0, width);
        return bytes;
    };
    refused(zeroed(24, 8), "exporter process id is 0");
    refused(zeroed(56, 8), "size is 0");
    refused(changed(49, 0x10), "run past the allocation");  // offset 4096
    refused(changed(49, 0), "disagrees");  // offset 0 in the record, 256 in the IPC descriptor
    std::vector<std::uint8_t> longer = good;
    longer.push_back(0);
    refused(longer, "which takes");
    refused(changed(64, 'X'), "IpcMemoryDescriptor");
    refused(good, "carried a file descriptor", ends.first.socket().get());
    if (has_vmm()) {
        // A POSIX kind without its descriptor.
        std::vector<std::uint8_t> bytes(good.begin(), good.begin() + 64);
        bytes[16] = static_cast<std::uint8_t>(AllocationKind::Vmm);
        bytes[20] = static_cast<std::uint8_t>(HandleType::PosixFileDescriptor);
        const auto info = cudyn::PhysicalMemoryInfo{4096 * 1024, 2 * kMiB, HandleType::PosixFileDescriptor}.to_bytes();
        bytes.insert(bytes.end(), info.begin(), info.end());
        std::memset(bytes.data() + 40, 0, 8);
        bytes[42] = 0x40;  // allocation size 4 MiB
        refused(bytes, "no file descriptor");
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("descriptors reach a process in its own user, PID and mount namespaces, without the exporter's pid or its "
          "/proc (VMM memory and pool memory)",
          "[emulated][share-any]") {
    auto context = activate(0);
    {
        const VmmMemory vmm(HandleType::PosixFileDescriptor);
        const CUdeviceptr base = vmm.mapping.device_address();
        export_to_namespaced_consumer(base, base + 4096, 64 * 1024, {AllocationKind::Vmm, HandleType::PosixFileDescriptor, 2 * kGranule});
    }
    auto pool = take(cudyn::MemoryPool::create(shareable_pool()));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
    require_ok(stream.synchronize());
    export_to_namespaced_consumer(buffer.device_address(), buffer.device_address() + 512, 4096,
                        {AllocationKind::Pool, HandleType::PosixFileDescriptor, kMiB});
    require_ok(buffer.free());
    require_ok(stream.synchronize());
}

TEST_CASE("pool memory a process imported is not exported again: NotSupported naming why, before the driver",
          "[emulated][cuda11][share-any]") {
    auto context = activate(0);
    auto pool = take(cudyn::MemoryPool::create(shareable_pool()));
    auto stream = take(cudyn::Stream::create());
    auto buffer = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, kMiB / 4, stream));
    require_ok(stream.synchronize());
    const AllocationDescriptor descriptor = take(cudyn::export_allocation(buffer.device_address() + 256, 4096));
    ParentSide side = start_child("share-any-reexporter");
    require_ok(cudyn::send_descriptor(side.channel, descriptor, kStep));
    (void)take(side.channel.receive(kDone, kStep));
    CHECK(side.child.wait(kChildTimeout) == 0);
    require_ok(buffer.free());  // after the importer freed its import
    require_ok(stream.synchronize());
}

TEST_CASE("receive_allocation refuses a message whose record names another exporter than its parts do",
          "[emulated][cuda11][legacy][share-any]") {
    auto context = activate(0);
    auto ends = take(cudyn::FdChannel::pair());
    // The message of `descriptor`, sent again with the record's exporter pid,
    // then its token, changed (the high byte, so that neither becomes 0):
    // refused, naming the part that disagrees; unchanged, accepted.
    const auto refused_when_changed = [&](const AllocationDescriptor& descriptor, const std::string& part) {
        const long descriptors = open_descriptors();
        require_ok(cudyn::send_descriptor(ends.first, descriptor));
        cudyn::ChannelMessage message = take(ends.second.receive(cudyn::kAllocationMessageTag));
        const int fd = message.fd ? message.fd.get() : -1;
        for (const std::size_t at : {std::size_t{24}, std::size_t{32}}) {
            INFO("record byte " << at + 7 << " changed");
            std::vector<std::uint8_t> bytes = message.payload;
            bytes[at + 7] ^= 0x80;
            require_ok(ends.first.send(cudyn::kAllocationMessageTag, bytes.data(), bytes.size(), fd));
            require_error(cudyn::receive_allocation(ends.second), ErrorCode::InvalidArgument,
                          "the " + part + "'s exporter");
        }
        require_ok(ends.first.send(cudyn::kAllocationMessageTag, message.payload.data(), message.payload.size(), fd));
        CHECK(take(cudyn::receive_allocation(ends.second)).exporter_pid() == descriptor.exporter_pid());
        message.fd = cudyn::FileDescriptor();
        CHECK(open_descriptors() == descriptors);
    };
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
    refused_when_changed(take(cudyn::export_allocation(buffer.device_address() + 256, 512)), "legacy IPC descriptor");
    if (!has_vmm()) return;
    auto pool = take(cudyn::MemoryPool::create(shareable_pool()));
    auto stream = take(cudyn::Stream::create());
    auto from_pool = take(cudyn::StreamOrderedBuffer<std::uint32_t>::allocate(pool, 1024, stream));
    {
        const AllocationDescriptor pooled = take(cudyn::export_allocation(from_pool.device_address(), 4096));
        refused_when_changed(pooled, "pool pointer descriptor");
    }
    require_ok(from_pool.free());
    require_ok(stream.synchronize());
}
