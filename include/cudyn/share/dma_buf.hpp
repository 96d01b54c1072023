// cudyn — a device address range exported as a Linux dma-buf file
// descriptor (cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, CUDA 11.7+), for importers outside CUDA:
// an RDMA NIC (ibv_reg_dmabuf_mr), a video or capture driver, another
// device's driver.
//
// The driver exports cuMemAlloc memory and VMM memory mapped on a device
// (every byte of the range mapped, by allocations on one device with
// identical properties), and pinned host memory only where the device reports
// HOST_ALLOC_DMA_BUF_SUPPORTED; it refuses managed memory, registered host
// memory and VMM memory on a host location. The file descriptor stands on
// its own: the importer's registration is what keeps the pages, so close it
// when the importer is done. Linux only.
#pragma once

#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

// How the importer reaches the memory (CUmemRangeFlags).
enum class DmaBufMapping : unsigned long long {
    Default = 0,  // the driver's choice
    // Through the device's PCIe BAR1 (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE),
    // for NICs that sit beside the GPU; NotSupported where the platform lacks
    // it (only the driver's answer says so: no device attribute does).
    Pcie = CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE,
};

// Exports [address, address + bytes) as a dma-buf file descriptor
// (close-on-exec, mode 0600, fstat size = bytes).
//
// Checked before the export, in this order: InvalidArgument for a null
// address, a zero size, an unknown mapping, an address or size that is not a
// multiple of the host page size, a range that wraps; NotSupported where the
// driver lacks cuMemGetHandleForAddressRange; then one cuPointerGetAttributes
// call: InvalidArgument for memory the driver does not track, managed memory,
// and a range running past the end of its allocation (for VMM memory: of its
// reservation); NotSupported where the memory's device reports
// DMA_BUF_SUPPORTED 0 (HOST_ALLOC_DMA_BUF_SUPPORTED 0 for host memory). What
// only the driver can judge (a VMM range with unmapped bytes or allocations
// of different devices or properties, registered or host-VMM memory) is its
// CUDA_ERROR_INVALID_VALUE, kept as a Driver error with a hint. NotSupported
// on Windows.
Result<FileDescriptor> export_dma_buf(CUdeviceptr address, std::size_t bytes,
                                      DmaBufMapping mapping = DmaBufMapping::Default);

// The bytes of `part` (any device view: a buffer's span or subspan, a
// MappedRange's or a GrowableBuffer's device_span()).
template <typename T>
Result<FileDescriptor> export_dma_buf(DeviceSpan<T> part, DmaBufMapping mapping = DmaBufMapping::Default) {
    return export_dma_buf(part.device_address(), part.size_bytes(), mapping);
}

// The whole buffer (its byte size must be a multiple of the host page size).
template <typename T>
Result<FileDescriptor> export_dma_buf(const DeviceBuffer<T>& buffer, DmaBufMapping mapping = DmaBufMapping::Default) {
    return export_dma_buf(buffer.device_address(), buffer.size_bytes(), mapping);
}

}  // namespace cudyn
