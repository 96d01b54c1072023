// cudyn — every public header of the library, for programs that do not mind
// the compile time. (The MPI component's headers, cudyn/mpi/, come with
// libcudyn-mpi and are not included here.)
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/core/teardown.hpp"

#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/driver_table.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/loader/loader.hpp"

#include "cudyn/device/capability_fingerprint.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/device/stream_memory_ops.hpp"
#include "cudyn/device/stream_ref.hpp"
#include "cudyn/device/topology.hpp"

#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/device_span.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/host_span.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/managed_range.hpp"
#include "cudyn/memory/memory_info.hpp"
#include "cudyn/memory/migration_policy.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/prefetch_plan.hpp"
#include "cudyn/memory/stream_attachment.hpp"
#include "cudyn/memory/zero_copy_buffer.hpp"

#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/vmm/range_access.hpp"

#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include "cudyn/share/allocation_sharing.hpp"
#include "cudyn/share/descriptor_transfer.hpp"
#include "cudyn/share/dma_buf.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/share/ipc_handle.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/physical_memory_sharing.hpp"
#include "cudyn/share/pool_sharing.hpp"
#include "cudyn/checkpoint/process_checkpoint.hpp"
#include "cudyn/share/range_sharing.hpp"

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/channel/file_descriptor.hpp"
#include "cudyn/channel/peer_policy.hpp"
#include "cudyn/channel/socket_path.hpp"

#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvlink.hpp"
#include "cudyn/nvml/nvml_library.hpp"
