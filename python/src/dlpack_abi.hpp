// The DLPack exchange ABI (the structures a capsule carries), declared here
// from the published specification so the bindings depend on no DLPack
// header. Layouts must match the specification exactly: consumers such as
// PyTorch, CuPy and NumPy read these bytes.
#pragma once

#include <cstdint>

namespace cudyn_python::dlpack {

// Device types of the memory a tensor lives in (DLDeviceType).
enum DeviceType : std::int32_t {
    Cpu = 1,
    Cuda = 2,          // device memory
    CudaHost = 3,      // pinned host memory (cuMemHostAlloc)
    CudaManaged = 13,  // managed memory (cuMemAllocManaged)
};

// Element type codes (DLDataTypeCode).
enum TypeCode : std::uint8_t {
    Int = 0,
    UInt = 1,
    Float = 2,
    Bfloat = 4,
    Complex = 5,
    Bool = 6,
};

struct Device {
    std::int32_t device_type;
    std::int32_t device_id;
};

struct DataType {
    std::uint8_t code;
    std::uint8_t bits;
    std::uint16_t lanes;
};

struct Tensor {
    void* data;
    Device device;
    std::int32_t ndim;
    DataType dtype;
    std::int64_t* shape;
    std::int64_t* strides;  // null: compact row-major
    std::uint64_t byte_offset;
};

// The legacy (unversioned) capsule, named "dltensor".
struct ManagedTensor {
    Tensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(ManagedTensor* self);
};

struct PackVersion {
    std::uint32_t major;
    std::uint32_t minor;
};

// The versioned capsule (DLPack 1.0 and later), named "dltensor_versioned".
struct ManagedTensorVersioned {
    PackVersion version;
    void* manager_ctx;
    void (*deleter)(ManagedTensorVersioned* self);
    std::uint64_t flags;
    Tensor dl_tensor;
};

constexpr std::uint64_t flag_read_only = 1u << 0;
constexpr std::uint64_t flag_is_copied = 1u << 1;

// The version this module produces: 1.0 (it uses nothing later versions added).
constexpr PackVersion produced_version{1, 0};

constexpr const char* legacy_name = "dltensor";
constexpr const char* legacy_used_name = "used_dltensor";
constexpr const char* versioned_name = "dltensor_versioned";
constexpr const char* versioned_used_name = "used_dltensor_versioned";

}  // namespace cudyn_python::dlpack
