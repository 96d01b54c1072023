// cudyn — sharing VMM memory (PhysicalMemory) with other processes through
// shareable handles: a POSIX file descriptor on one machine, a fabric handle
// across the nodes of an NVLink domain (IMEX). The handle type must be
// requested when the memory is created (AllocationProperties::with_handle_types).
//
// cuMemImportFromShareableHandle does not give the size back, so it travels
// with the handle (PhysicalMemoryInfo). send_descriptor / receive_memory_fd
// (descriptor_transfer.hpp) carry a MemoryFdDescriptor over an FdChannel;
// this header does not bring in the channel, so any transport can.
#pragma once

#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/record_access.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace cudyn {

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
// the handle. The file descriptor is checked (open, fstat, not smaller than
// info.size_bytes) and closed when this returns, whatever happened.
Result<PhysicalMemory> import_memory_fd(MemoryFdDescriptor exported);

// A fabric handle with its metadata: 96 bytes, send them anyhow.
class MemoryFabricDescriptor {
public:
    static constexpr std::size_t kSerializedSize = 96;
    using Bytes = std::array<std::uint8_t, kSerializedSize>;

    static Result<MemoryFabricDescriptor> from_bytes(const void* data, std::size_t size);
    Bytes to_bytes() const noexcept;

    const FabricHandle& handle() const noexcept { return fields_.handle; }
    const PhysicalMemoryInfo& info() const noexcept { return fields_.info; }

private:
    friend struct detail::RecordAccess;
    struct Fields {
        // The wire leaves the handle type out: the record's magic says fabric.
        PhysicalMemoryInfo info{0, 0, HandleType::Fabric};
        FabricHandle handle;
    };
    MemoryFabricDescriptor() = default;
    Fields fields_;
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
