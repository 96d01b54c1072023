// Shareable VMM handles on the fake drivers ([shareable]): a PhysicalMemory
// exported as a POSIX descriptor (passed over an FdChannel with SCM_RIGHTS) or
// as a fabric handle (bytes), imported by a second process into a
// PhysicalMemory that maps like any other; both sides see each other's
// writes. The emulated fake backs VMM memory with memfds, so the bytes are
// really shared. cuda11 has no fabric attribute (a CUDA 12 one), legacy
// (CUDA 10.1) no VMM at all: both say NotSupported.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/share/descriptor_transfer.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using cudyn::AccessFlags;
using cudyn::AddressRange;
using cudyn::AllocationProperties;
using cudyn::ErrorCode;
using cudyn::MemoryFdDescriptor;
using cudyn::MemoryFabricDescriptor;
using cudyn::FileDescriptor;
using cudyn::HandleType;
using cudyn::Location;
using cudyn::MappedRange;
using cudyn::PhysicalMemory;
using cudyn::PhysicalMemoryInfo;
using cudyn_test::activate;
using cudyn_test::ChildChecks;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::kMiB;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::ScopedFault;
using cudyn_test::ScopedImexChannel;
using cudyn_test::take;
using namespace cudyn_test::ipc;  // tags, timeouts, probe(), ok(), start_child(), ...

namespace {

constexpr std::uint32_t kFirst = 0x5eed0001u;
constexpr std::uint32_t kReply = 0x5eed0002u;
constexpr std::size_t kBytes = 4 * kMiB;  // two granules of the fake

const std::vector<cudyn::AccessGrant> kDevice0 = {{Location::device(0), AccessFlags::ReadWrite}};

// Maps imported memory, checks the exporter's bytes, writes the reply into the
// second half, and unmaps: what a consumer does with either kind of handle.
void use_imported(ChildChecks& check, const PhysicalMemory& memory) {
    check.expect(memory.size_bytes() == kBytes && memory.granularity() == 2 * kMiB, "size and granularity carried over");
    auto range = AddressRange::reserve(kBytes);
    if (!ok(check, range, "reserve")) return;
    auto mapping = MappedRange::map(*range, 0, memory, kDevice0);
    if (!ok(check, mapping, "map the imported memory")) return;
    check.expect(same_words(mapping->device_address(), kBytes / 2, kFirst), "the exporter's bytes are visible");
    ok(check, set_words(mapping->device_address() + kBytes / 2, kBytes / 2, kReply), "write the reply");
}

// Receives a POSIX descriptor with its metadata, imports it, uses it.
int fd_consumer_role(int, char**) {
    return run_role("shareable-fd-consumer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        const long descriptors = open_descriptors();
        {
            auto received = cudyn::receive_memory_fd(channel, kStep);
            if (!ok(check, received, "receive_memory_fd")) return;
            check.expect(received->info.size_bytes == kBytes &&
                             received->info.handle_type == HandleType::PosixFileDescriptor,
                         "the metadata came with the descriptor");
            const int received_fd = received->fd.get();
            check.expect(::fcntl(received_fd, F_GETFD) >= 0, "the received descriptor is open here");
            auto memory = cudyn::import_memory_fd(std::move(*received));
            check.expect(::fcntl(received_fd, F_GETFD) < 0, "the received descriptor is closed after the import");
            if (!ok(check, memory, "import_memory_fd")) return;
            check.expect(cudyn::ledger::snapshot().of(cudyn::MemoryKind::AllocationImported).live_bytes ==
                             memory->size_bytes(),
                         "the memory ledger counts the imported memory");
            use_imported(check, *memory);
            ok(check, send_tag(channel, kDone), "send 'done'");
        }
        check.expect(open_descriptors() == descriptors, "no descriptor left open in the consumer");
    });
}
const cudyn_test::ChildRole fd_consumer("shareable-fd-consumer", fd_consumer_role);

// Receives a fabric descriptor as bytes, imports it, uses it.
int fabric_consumer_role(int, char**) {
    return run_role("shareable-fabric-consumer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        auto descriptor = receive_descriptor<MemoryFabricDescriptor>(channel, kRawBytes);
        if (!ok(check, descriptor, "fabric descriptor")) return;
        auto memory = cudyn::import_memory_fabric(*descriptor);
        if (!ok(check, memory, "import_memory_fabric")) return;
        use_imported(check, *memory);
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole fabric_consumer("shareable-fabric-consumer", fabric_consumer_role);

// Exporter's side: memory with `types`, mapped and filled with kFirst.
struct Exported {
    AddressRange range;
    PhysicalMemory memory;
    MappedRange mapping;
};

Exported make_exported(HandleType types) {
    const auto props = AllocationProperties::device(0).with_handle_types(types);
    auto range = take(AddressRange::reserve(kBytes));
    auto memory = take(PhysicalMemory::create(props, kBytes));
    auto mapping = take(MappedRange::map(range, 0, memory, kDevice0));
    cudyn_test::fill32(mapping.device_address(), kBytes, kFirst);
    return Exported{std::move(range), std::move(memory), std::move(mapping)};
}

}  // namespace

TEST_CASE("a PhysicalMemory passed as a POSIX fd maps in another process; both see the other's writes",
          "[emulated][cuda11][shareable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        Exported exporter = make_exported(HandleType::PosixFileDescriptor);
        auto exported = take(cudyn::export_memory_fd(exporter.memory));
        CHECK(exported.fd.valid());
        CHECK(exported.info.size_bytes == kBytes);
        CHECK(exported.info.granularity == 2 * kMiB);
        CHECK(exported.info.handle_type == HandleType::PosixFileDescriptor);

        ParentSide side = start_child("shareable-fd-consumer");
        require_ok(cudyn::send_descriptor(side.channel, exported, kStep));
        require_ok(exported.fd.close());  // the child holds its own copy now
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
        CHECK(cudyn_test::all_equal(exporter.mapping.device_address(), kBytes / 2, kFirst));
        CHECK(cudyn_test::all_equal(exporter.mapping.device_address() + kBytes / 2, kBytes / 2, kReply));
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("modelled: with an IMEX channel a fabric handle imports in another process and maps like any other",
          "[emulated][shareable][modelled]") {
    // No real machine measured had an IMEX channel: this success is the fake's
    // model of fabric handles (its own handle bytes), not a measured one.
    const ScopedImexChannel imex;
    auto context = activate(0);
    const DriverSnapshot before;
    {
        CHECK(take(cudyn::probe_fabric_support(take(cudyn::Device::get(0)))));
        Exported exporter = make_exported(HandleType::Fabric);
        auto descriptor = take(cudyn::export_memory_fabric(exporter.memory));
        CHECK(descriptor.info().size_bytes == kBytes);
        const auto bytes = descriptor.to_bytes();
        CHECK(take(MemoryFabricDescriptor::from_bytes(bytes.data(), bytes.size())).handle() == descriptor.handle());

        ParentSide side = start_child("shareable-fabric-consumer");
        require_ok(send_bytes(side.channel, kRawBytes, bytes));
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
        CHECK(cudyn_test::all_equal(exporter.mapping.device_address() + kBytes / 2, kBytes / 2, kReply));
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("fabric handles: NotSupported where the device or the system has none", "[emulated][cuda11][shareable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const auto device = take(cudyn::Device::get(0));
    {
        if (FakeDriver::loaded().variant() == "cuda11") {
            // HANDLE_TYPE_FABRIC_SUPPORTED is a CUDA 12 attribute: a CUDA 11 driver reads 0.
            CHECK_FALSE(take(cudyn::probe_fabric_support(device)));
            require_error(PhysicalMemory::create(AllocationProperties::device(0).with_handle_types(HandleType::Fabric),
                                                 2 * kMiB),
                          ErrorCode::NotSupported, "fabric handles are not supported");
        } else {
            // No IMEX channel (the fake's default, as on every machine
            // measured): the attribute says yes, the driver refuses the
            // creation, and the probe and the creation say so.
            CHECK(take(device.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)) == 1);
            CHECK_FALSE(take(cudyn::probe_fabric_support(device)));
            const auto refused = PhysicalMemory::create(
                AllocationProperties::device(0).with_handle_types(HandleType::Fabric), 2 * kMiB);
            require_error(refused, ErrorCode::NotSupported, "IMEX");
            CHECK(refused.error().driver_result == CUDA_ERROR_NOT_PERMITTED);
        }
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("modelled: with an IMEX channel, refusals at export and import still say IMEX; the attribute off, "
          "NotSupported before the driver",
          "[emulated][shareable][modelled]") {
    // Refusals behind a creation that worked: no real machine measured got
    // that far (none had an IMEX channel), so the channel is the fake's model.
    const ScopedImexChannel imex;
    auto context = activate(0);
    const DriverSnapshot before;
    const auto device = take(cudyn::Device::get(0));
    {
        CHECK(take(cudyn::probe_fabric_support(device)));
        {
            ScopedFault fault("cuMemExportToShareableHandle:1:CUDA_ERROR_NOT_PERMITTED");
            CHECK_FALSE(take(cudyn::probe_fabric_support(device)));
        }
        // Some systems refuse already at creation: the probe and create say so too.
        {
            ScopedFault fault("cuMemCreate:1:CUDA_ERROR_NOT_PERMITTED");
            CHECK_FALSE(take(cudyn::probe_fabric_support(device)));
        }
        {
            ScopedFault fault("cuMemCreate:1:CUDA_ERROR_NOT_PERMITTED");
            const auto refused = PhysicalMemory::create(
                AllocationProperties::device(0).with_handle_types(HandleType::Fabric), 2 * kMiB);
            require_error(refused, ErrorCode::NotSupported, "IMEX");
            CHECK(refused.error().driver_result == CUDA_ERROR_NOT_PERMITTED);
        }
        {
            // NOT_READY: the fabric or IMEX service is not up yet; the driver's
            // answer is kept, with what to check.
            ScopedFault fault("cuMemCreate:1:CUDA_ERROR_NOT_READY");
            const auto refused = PhysicalMemory::create(
                AllocationProperties::device(0).with_handle_types(HandleType::Fabric), 2 * kMiB);
            require_error(refused, ErrorCode::Driver, "the fabric is not ready: is the IMEX service");
            CHECK(refused.error().driver_result == CUDA_ERROR_NOT_READY);
        }
        Exported exporter = make_exported(HandleType::Fabric);
        {
            ScopedFault fault("cuMemExportToShareableHandle:1:CUDA_ERROR_NOT_PERMITTED");
            const auto refused = cudyn::export_memory_fabric(exporter.memory);
            require_error(refused, ErrorCode::NotSupported, "IMEX");
            CHECK(refused.error().driver_result == CUDA_ERROR_NOT_PERMITTED);
        }
        auto descriptor = take(cudyn::export_memory_fabric(exporter.memory));
        {
            ScopedFault fault("cuMemImportFromShareableHandle:1:CUDA_ERROR_NOT_PERMITTED");
            require_error(cudyn::import_memory_fabric(descriptor), ErrorCode::NotSupported, "IMEX");
        }
        // The device attribute off: NotSupported before any export.
        FakeDriver::loaded().set_attribute(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0);
        CHECK_FALSE(take(cudyn::probe_fabric_support(device)));
        const DriverSnapshot untouched({"cuMemExportToShareableHandle"});
        require_error(cudyn::export_memory_fabric(exporter.memory), ErrorCode::NotSupported,
                      "HANDLE_TYPE_FABRIC_SUPPORTED is 0");
        untouched.require_untouched();
        FakeDriver::loaded().set_attribute(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 1);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("shareable handles: bad input is InvalidArgument, failures leak neither memory nor descriptors",
          "[emulated][cuda11][shareable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        // Exports need the handle type requested at creation, and live memory.
        Exported plain = make_exported(HandleType::None);
        require_error(cudyn::export_memory_fd(plain.memory), ErrorCode::InvalidArgument, "created without the posix_fd");
        require_error(cudyn::export_memory_fabric(plain.memory), ErrorCode::InvalidArgument, "created without the fabric");
        require_error(cudyn::export_memory_fd(PhysicalMemory{}), ErrorCode::InvalidArgument, "empty");

        Exported exporter = make_exported(HandleType::PosixFileDescriptor);
        const PhysicalMemoryInfo good = take(cudyn::export_memory_fd(exporter.memory)).info;
        const DriverSnapshot untouched({"cuMemImportFromShareableHandle"});
        const auto import_with = [&](PhysicalMemoryInfo info) {
            return cudyn::import_memory_fd(MemoryFdDescriptor{take(cudyn::export_memory_fd(exporter.memory)).fd.duplicate().value(),
                                                     info});
        };
        PhysicalMemoryInfo bad = good;
        bad.size_bytes = 0;
        require_error(import_with(bad), ErrorCode::InvalidArgument, "size is 0");
        bad = good;
        bad.size_bytes = good.size_bytes + 4096;
        require_error(import_with(bad), ErrorCode::InvalidArgument, "not a multiple of the granularity");
        bad = good;
        bad.handle_type = HandleType::PosixFileDescriptor | HandleType::Fabric;
        require_error(import_with(bad), ErrorCode::InvalidArgument, "not exactly one known type");
        bad = good;
        bad.handle_type = HandleType::Fabric;
        require_error(import_with(bad), ErrorCode::InvalidArgument, "metadata is for a fabric handle");
        bad = good;
        bad.size_bytes = 2 * good.size_bytes;  // larger than the file behind the descriptor
        require_error(import_with(bad), ErrorCode::InvalidArgument, "the metadata says");
        require_error(cudyn::import_memory_fd(MemoryFdDescriptor{FileDescriptor(), good}), ErrorCode::InvalidArgument,
                      "descriptor is empty");
        untouched.require_untouched();

        // Records: malformed bytes.
        const auto bytes = good.to_bytes();
        CHECK(take(PhysicalMemoryInfo::from_bytes(bytes.data(), bytes.size())).size_bytes == good.size_bytes);
        require_error(PhysicalMemoryInfo::from_bytes(bytes.data(), bytes.size() - 1), ErrorCode::InvalidArgument,
                      "length");
        auto forged = bytes;
        forged[16] = 1;  // size no longer a multiple of the granularity
        require_error(PhysicalMemoryInfo::from_bytes(forged.data(), forged.size()), ErrorCode::InvalidArgument,
                      "not a multiple");
        require_error(MemoryFabricDescriptor::from_bytes(bytes.data(), bytes.size()), ErrorCode::InvalidArgument,
                      "wrong magic");

        // The driver failing after the import: the imported handle is released.
        for (const char* entry : {"cuMemImportFromShareableHandle", "cuMemGetAllocationPropertiesFromHandle"}) {
            INFO(entry);
            const long live = FakeDriver::loaded().live_allocations();
            ScopedFault fault((std::string(entry) + ":1:CUDA_ERROR_INVALID_VALUE").c_str());
            require_error(import_with(good), ErrorCode::Driver, entry);
            CHECK(FakeDriver::loaded().live_allocations() == live);
        }
        // And a working import in this process maps the same bytes.
        auto again = take(import_with(good));
        auto range = take(AddressRange::reserve(kBytes));
        auto mapping = take(MappedRange::map(range, 0, again, kDevice0));
        CHECK(cudyn_test::all_equal(mapping.device_address(), kBytes, kFirst));

        // The channel helpers: a message without a descriptor is refused.
        auto ends = take(cudyn::FdChannel::pair());
        require_ok(ends.first.send(cudyn::kMemoryFdMessageTag, bytes.data(), bytes.size()));
        require_error(cudyn::receive_memory_fd(ends.second), ErrorCode::InvalidArgument, "carried no file descriptor");
        require_error(cudyn::send_descriptor(ends.first, MemoryFdDescriptor{FileDescriptor(), good}), ErrorCode::InvalidArgument,
                      "descriptor is empty");
    }
    CHECK(before.live_delta() == 0);
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("legacy driver: shareable handles are NotSupported, naming the entry", "[legacy][shareable]") {
    auto context = activate(0);
    const DriverSnapshot before;
    FileDescriptor file(::memfd_create("cudyn-test", MFD_CLOEXEC));
    REQUIRE(::ftruncate(file.get(), static_cast<off_t>(2 * kMiB)) == 0);
    PhysicalMemoryInfo info;
    info.size_bytes = 2 * kMiB;
    info.granularity = 2 * kMiB;
    info.handle_type = HandleType::PosixFileDescriptor;
    require_error(cudyn::import_memory_fd(MemoryFdDescriptor{std::move(file), info}), ErrorCode::NotSupported,
                  "cuMemImportFromShareableHandle");
    CHECK_FALSE(take(cudyn::probe_fabric_support(take(cudyn::Device::get(0)))));
    CHECK(before.live_delta() == 0);
}
