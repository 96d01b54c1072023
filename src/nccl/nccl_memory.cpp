// cudyn nccl — VMM memory with the properties ncclMemAlloc would give it.
#include "cudyn/nccl/nccl_memory.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"

#include "core/internal.hpp"

namespace cudyn {

namespace {
constexpr detail::Operation kProperties{"nccl_allocation_properties"};
}  // namespace

Result<AllocationProperties> nccl_allocation_properties(int device, bool fabric) {
    if (device < 0) return kProperties.invalid("device ordinal " + std::to_string(device) + " is negative");
    CUDYN_TRY_ASSIGN(const Device gpu, Device::get(device));
    CUDYN_TRY_ASSIGN(const DeviceCapabilities capabilities, probe_capabilities(gpu));
    if (!capabilities.posix_fd_handles)
        return kProperties.not_supported("cuMemCreate", "device " + std::to_string(device) +
                                                            " cannot share VMM memory as a POSIX file descriptor, "
                                                            "which NCCL's peers in other processes import");
    HandleType handles = HandleType::PosixFileDescriptor;
    if (fabric) {
        if (!capabilities.fabric_handles)
            return kProperties.not_supported("cuMemCreate", "device " + std::to_string(device) +
                                                                " does not report fabric handles");
        handles = handles | HandleType::Fabric;
    }
    AllocationProperties properties =
        AllocationProperties::device(device).with_handle_types(handles).with_gpu_direct_rdma(capabilities.rdma_with_vmm);
    CUDYN_TRY(properties.check_supported());
    return properties;
}

Result<GrowableBuffer> create_nccl_growable_buffer(int device, std::size_t capacity, std::size_t bytes,
                                                   std::size_t chunk_size_bytes, bool fabric) {
    CUDYN_TRY_ASSIGN(const AllocationProperties properties, nccl_allocation_properties(device, fabric));
    GrowableBufferOptions options;
    options.chunk_size_bytes = chunk_size_bytes;
    CUDYN_TRY_ASSIGN(GrowableBuffer buffer, GrowableBuffer::create(properties, capacity, options));
    if (bytes != 0) CUDYN_TRY(buffer.grow_to(bytes));
    return buffer;
}

}  // namespace cudyn
