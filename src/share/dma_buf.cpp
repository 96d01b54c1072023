// cudyn — export_dma_buf: cuMemGetHandleForAddressRange(DMA_BUF_FD) after the
// checks the driver's refusals cannot explain.
#include "cudyn/share/dma_buf.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/memory_info.hpp"

#include "core/internal.hpp"
#include "device/device_facts.hpp"
#include "memory/internal.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif

#include <cstdint>
#include <string>
#include <utility>

namespace cudyn {

namespace {

constexpr detail::Operation kExport{"export_dma_buf"};

#if !defined(_WIN32)

using detail::hex;

// The driver wants address and size aligned to the host page size.
std::size_t host_page_size() {
    static const std::size_t page = [] {
        const long size = ::sysconf(_SC_PAGESIZE);
        return size > 0 ? static_cast<std::size_t>(size) : std::size_t{4096};
    }();
    return page;
}

// "DMA_BUF_SUPPORTED is 0 on device 1": the row's own attribute name.
std::string zero_on(bool DeviceCapabilities::*field, int ordinal) {
    for (const DeviceCapabilityInfo& row : device_capability_list)
        if (row.field == field)
            return std::string(row.attribute_name) + " is 0 on device " + std::to_string(ordinal);
    return "the attribute is 0 on device " + std::to_string(ordinal);
}

// What the memory at `address` must be for the driver to export
// [address, address + bytes): tracked, not managed, the range inside its
// allocation, and the device willing to export that kind of memory.
Result<void> check_memory(CUdeviceptr address, std::size_t bytes) {
    CUDYN_TRY_ASSIGN(const PointerAttributes where, pointer_attributes(address));
    if (!where.known())
        return kExport.invalid(hex(address) + " is not memory the driver tracks (freed, reserved but unmapped, or "
                                              "pageable host memory)");
    if (where.is_managed)
        return kExport.invalid(hex(address) + " is managed memory, which the driver does not export as a dma-buf");
    if (where.memory_type == MemoryType::Array) return kExport.invalid(hex(address) + " is a CUDA array");
    if (address < where.range_base)
        return kExport.invalid(hex(address) + " lies before the allocation the driver reports for it (" +
                               hex(where.range_base) + ")");
    CUDYN_TRY(detail::check_inside_allocation(kExport, address - where.range_base, bytes, where.range_size_bytes));
    int ordinal = where.device_ordinal;
    if (ordinal < 0) {
        CUDYN_TRY_ASSIGN(const CUdevice current, detail::current_context_device());
        ordinal = static_cast<int>(current);
    }
    CUDYN_TRY_ASSIGN(const DeviceCapabilities caps, detail::capabilities(ordinal, kExport.name()));
    const auto entry = entry_info(&DriverTable::cuMemGetHandleForAddressRange_v11070).abi_symbol;
    if (where.memory_type == MemoryType::Host) {
        if (!caps.host_alloc_dma_buf)
            return kExport.not_supported(entry, "host memory at " + hex(address) +
                                                    ": pinned host memory is not exportable here (" +
                                                    zero_on(&DeviceCapabilities::host_alloc_dma_buf, ordinal) +
                                                    "); registered and host-VMM memory never are");
        return ok();
    }
    if (!caps.dma_buf) return kExport.not_supported(entry, zero_on(&DeviceCapabilities::dma_buf, ordinal));
    return ok();
}

#endif  // !_WIN32

}  // namespace

Result<FileDescriptor> export_dma_buf(CUdeviceptr address, std::size_t bytes, DmaBufMapping mapping) {
    if (address == 0) return kExport.invalid("address is null (an empty buffer or view)");
    if (bytes == 0) return kExport.invalid("bytes must be non-zero");
    if (mapping != DmaBufMapping::Default && mapping != DmaBufMapping::Pcie)
        return kExport.invalid("mapping " + std::to_string(static_cast<unsigned long long>(mapping)) +
                               " is neither Default nor Pcie");
#if defined(_WIN32)
    return kExport.not_supported("cuMemGetHandleForAddressRange", "dma-buf file descriptors are Linux's");
#else
    const std::size_t page = host_page_size();
    if (address % page != 0)
        return kExport.invalid("address " + hex(address) + " is not a multiple of the host page size " +
                               std::to_string(page));
    if (bytes % page != 0)
        return kExport.invalid(std::to_string(bytes) + " bytes are not a multiple of the host page size " +
                               std::to_string(page));
    if (bytes > UINT64_MAX - address)
        return kExport.invalid(std::to_string(bytes) + " bytes at " + hex(address) + " wrap around the address space");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetHandleForAddressRange_v11070));
    CUDYN_TRY(check_memory(address, bytes));
    int fd = -1;
    auto exported = call_driver(&DriverTable::cuMemGetHandleForAddressRange_v11070, static_cast<void*>(&fd), address,
                                bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, static_cast<unsigned long long>(mapping));
    if (!exported) {
        Error error = std::move(exported).error();
        if (error.driver_result == CUDA_ERROR_NOT_SUPPORTED && mapping == DmaBufMapping::Pcie)
            error.message += " (the PCIe (BAR1) dma-buf mapping is not available here; DmaBufMapping::Default is)";
        else if (error.driver_result == CUDA_ERROR_INVALID_VALUE)
            error.message += " (the driver exports cuMemAlloc memory, VMM memory on one device whose every byte in "
                             "the range is mapped by allocations of identical properties, and pinned host memory "
                             "where supported)";
        return error;
    }
    return FileDescriptor(fd);
#endif
}

}  // namespace cudyn
