// fakecuda_identity.cpp — which physical device each emulated device is: a
// UUID, a PCI bus id and (in the Windows build) a LUID, fixed per ordinal so
// that every process of a test sees the same ones, as processes on one
// machine do. The bus id follows the PCI attributes (domain, bus, device),
// so an attribute override moves it, as the two always agree on a real
// driver. There is no MIG: both UUID ABIs answer the GPU's UUID.
#include "fake_state.hpp"

#include <cstdio>
#include <cstring>

using fake::State;

// GPU-6366616b-6500-4000-8000-0000000000NN: "cfake" in the first bytes, the
// version-4 / variant-1 bits of a random UUID, the ordinal in the last byte.
namespace {
const unsigned char kUuidPrefix[15] = {0x63, 0x66, 0x61, 0x6b, 0x65, 0x00, 0x40, 0x00,
                                       0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
}  // namespace

void fake::write_uuid(CUuuid* uuid, int physical) {
    std::memcpy(uuid->bytes, kUuidPrefix, sizeof kUuidPrefix);
    uuid->bytes[15] = static_cast<char>(physical);
}

int fake::physical_of_uuid(const State& st, const CUuuid& uuid) {
    const int physical = static_cast<unsigned char>(uuid.bytes[15]);
    if (std::memcmp(uuid.bytes, kUuidPrefix, sizeof kUuidPrefix) != 0 || physical >= st.device_count) return -1;
    return physical;
}

namespace {

CUresult get_uuid(CUuuid* uuid, CUdevice dev) {
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(fake::state(), dev)) return CUDA_ERROR_INVALID_DEVICE;
    const State& st = fake::state();
    fake::write_uuid(uuid, st.physical[static_cast<std::size_t>(dev)]);
    return CUDA_SUCCESS;
}

// "0000:18:00.0", as the driver writes it (upper-case hex).
void format_bus_id(const State& st, int device, char* out, std::size_t size) {
    std::snprintf(out, size, "%04X:%02X:%02X.0", fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                  fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
                  fake::attribute(st, device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
}

// A bus id as the driver reads one: [domain:]bus:device[.function], hex.
bool parse_bus_id(const char* text, unsigned* domain, unsigned* bus, unsigned* device) {
    unsigned function = 0;
    char tail = 0;
    if (std::sscanf(text, "%x:%x:%x.%x%c", domain, bus, device, &function, &tail) == 4) return true;
    *domain = 0;
    return std::sscanf(text, "%x:%x.%x%c", bus, device, &function, &tail) == 3;
}

}  // namespace

FAKE_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    return get_uuid(uuid, dev);
}

#if FAKE_HAS(11040)
FAKE_API CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    return get_uuid(uuid, dev);
}
#endif

FAKE_API CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(st, dev)) return CUDA_ERROR_INVALID_DEVICE;
    format_bus_id(st, dev, pciBusId, static_cast<std::size_t>(len));
    return CUDA_SUCCESS;
}

FAKE_API CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
    FAKE_ENTER(fake::kDeviceLevel);
    State& st = fake::state();
    unsigned domain = 0, bus = 0, device = 0;
    if (!dev || !pciBusId || !parse_bus_id(pciBusId, &domain, &bus, &device)) return CUDA_ERROR_INVALID_VALUE;
    for (int d = 0; d < st.device_count; ++d) {
        if (static_cast<unsigned>(fake::attribute(st, d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)) == domain &&
            static_cast<unsigned>(fake::attribute(st, d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)) == bus &&
            static_cast<unsigned>(fake::attribute(st, d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)) == device) {
            *dev = d;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

// Linux drivers export the entry and have no LUID to give; the Windows build
// answers one per device, with node mask 1.
FAKE_API CUresult CUDAAPI cuDeviceGetLuid(char* luid, unsigned int* deviceNodeMask, CUdevice dev) {
    FAKE_ENTER(fake::kDeviceLevel);
    if (!luid || !deviceNodeMask) return CUDA_ERROR_INVALID_VALUE;
    if (!fake::valid_device(fake::state(), dev)) return CUDA_ERROR_INVALID_DEVICE;
#if defined(_WIN32)
    std::memset(luid, 0, 8);
    luid[0] = static_cast<char>(0x40 + dev);
    *deviceNodeMask = 1;
    return CUDA_SUCCESS;
#else
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
}
