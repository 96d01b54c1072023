// cudyn — sharing VMM memory (PhysicalMemory) with other processes through
// shareable handles: a POSIX file descriptor on one machine, a fabric handle
// across the nodes of an NVLink domain (IMEX).
//
//     // exporter: the handle type must be requested when the memory is created
//     auto props = cudyn::AllocationProperties::device(0).with_handle_types(cudyn::HandleType::PosixFileDescriptor);
//     auto memory = cudyn::PhysicalMemory::create(props, size);
//     auto exported = cudyn::export_memory_fd(*memory);             // Result<MemoryFdDescriptor>: fd + size, granularity
//     cudyn::send_descriptor(channel, *exported);                     // SCM_RIGHTS over an FdChannel
//     // importer
//     auto received = cudyn::receive_memory_fd(channel);             // validated descriptor + metadata
//     auto imported = cudyn::import_memory_fd(std::move(*received)); // a PhysicalMemory; the fd is closed
//     auto mapping = cudyn::MappedRange::map(range, 0, *imported, {{cudyn::Location::device(0)}});
//
// send_descriptor / receive_memory_fd are in descriptor_transfer.hpp: this header
// does not bring in the channel, so any transport can carry an MemoryFdDescriptor.
// cuMemImportFromShareableHandle does not give the size back, so it travels
// with the handle (PhysicalMemoryInfo). A descriptor is never sent by
// pidfd_getfd (it needs ptrace rights, which containers withhold).
#pragma once

#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/core/result.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

namespace detail {
template <typename Record>
struct WireLayout;  // a record's byte layout, private to the library
}  // namespace detail

// What an importer needs besides the handle: 40 bytes on the wire.
struct PhysicalMemoryInfo {
    static constexpr std::size_t kSerializedSize = 40;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    std::uint64_t size_bytes = 0;   // of the physical allocation
    std::uint64_t granularity = 0;  // the exporter's minimum granularity for it
    HandleType handle_type = HandleType::None;

    // InvalidArgument naming the field: a zero size or granularity, a size
    // that is not a multiple of the granularity, not exactly one handle type.
    Result<void> validate() const;
    Bytes to_bytes() const noexcept;
    // Checks the record (length, magic, version) and validate().
    static Result<PhysicalMemoryInfo> from_bytes(const void* data, std::size_t size);
};

// A PhysicalMemory exported as a file descriptor, with its metadata.
struct MemoryFdDescriptor {
    FileDescriptor fd;
    PhysicalMemoryInfo info;
};

// cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR). InvalidArgument for
// empty memory or memory created without HandleType::PosixFileDescriptor;
// NotSupported on Windows.
Result<MemoryFdDescriptor> export_memory_fd(const PhysicalMemory& memory);
// cuMemImportFromShareableHandle, then the properties the driver reports for
// the handle. The descriptor is checked (open, fstat, not smaller than
// info.size_bytes) and closed when this returns, whatever happened.
Result<PhysicalMemory> import_memory_fd(MemoryFdDescriptor exported);

// A fabric handle with its metadata: 96 bytes, send them anyhow.
class MemoryFabricDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 96;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    static Result<MemoryFabricDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const FabricHandle& handle() const noexcept { return handle_; }
    const PhysicalMemoryInfo& info() const noexcept { return info_; }

private:
    friend Result<MemoryFabricDescriptor> export_memory_fabric(const PhysicalMemory& memory);
    friend struct detail::WireLayout<MemoryFabricDescriptor>;
    MemoryFabricDescriptor() = default;
    FabricHandle handle_;
    PhysicalMemoryInfo info_;
};

// Whether `device` can export fabric handles here: its
// HANDLE_TYPE_FABRIC_SUPPORTED attribute, then a real trial (create one
// granule with the fabric handle type and export it), because without an
// IMEX channel the attribute says yes and the driver still refuses.
// false means: share with POSIX descriptors instead.
Result<bool> probe_fabric_support(const Device& device);
// cuMemExportToShareableHandle(FABRIC). InvalidArgument for empty memory or
// memory created without HandleType::Fabric; NotSupported when the device
// lacks fabric handles or the driver refuses the export (no IMEX channel).
Result<MemoryFabricDescriptor> export_memory_fabric(const PhysicalMemory& memory);
// cuMemImportFromShareableHandle(FABRIC): NotSupported where the driver
// refuses fabric handles.
Result<PhysicalMemory> import_memory_fabric(const MemoryFabricDescriptor& descriptor);

}  // namespace cudyn
