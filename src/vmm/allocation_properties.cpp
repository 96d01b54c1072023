// cudyn — AllocationProperties: validation, support checks, granularity.
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "device/device_facts.hpp"
#include "memory/internal.hpp"
#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace cudyn {

namespace {

constexpr unsigned kKnownHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                                       CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC;

// Each handle type, its name and the capability that allows it.
struct HandleTypeRow {
    HandleType type;
    const char* name;
    bool DeviceCapabilities::*supported;
};
constexpr HandleTypeRow kHandleTypes[] = {
    {HandleType::PosixFileDescriptor, "posix_fd", &DeviceCapabilities::posix_fd_handles},
    {HandleType::Win32, "win32", &DeviceCapabilities::win32_handles},
    {HandleType::Win32Kmt, "win32_kmt", &DeviceCapabilities::win32_kmt_handles},
    {HandleType::Fabric, "fabric", &DeviceCapabilities::fabric_handles},
};

// "HANDLE_TYPE_FABRIC_SUPPORTED is 0": the attribute behind a "no", from the
// capability list, so a message cannot name another attribute than was read.
std::string is_zero(bool DeviceCapabilities::*field) {
    for (const DeviceCapabilityInfo& row : device_capability_list)
        if (row.field == field) return std::string(row.attribute_name) + " is 0";
    return "the attribute is 0";
}

}  // namespace

std::string to_string(HandleType types) {
    std::string text;
    for (const HandleTypeRow& row : kHandleTypes) {
        if (!includes(types, row.type)) continue;
        if (!text.empty()) text += '|';
        text += row.name;
    }
    if ((static_cast<unsigned>(types) & ~kKnownHandleTypes) != 0) text += text.empty() ? "unknown" : "|unknown";
    return text.empty() ? "none" : text;
}

AllocationProperties AllocationProperties::with_location(Location location) const noexcept {
    AllocationProperties copy = *this;
    copy.location_ = location;
    return copy;
}

AllocationProperties AllocationProperties::with_handle_types(HandleType types) const noexcept {
    AllocationProperties copy = *this;
    copy.handle_types_ = types;
    return copy;
}

AllocationProperties AllocationProperties::with_gpu_direct_rdma(bool capable) const noexcept {
    AllocationProperties copy = *this;
    copy.gpu_direct_rdma_ = capable;
    return copy;
}

Result<void> detail::check_location_and_handle_types(const Location& location, HandleType types,
                                                     const Operation& what, const char* entry) {
    // The text only when it is wrong: this runs on every create.
    if (location.id() < 0) CUDYN_TRY(location.validate((std::string(what.name()) + ": location").c_str()));
    if (location.kind() == LocationKind::HostNumaCurrent)
        return what.invalid(std::string("location: ") + entry +
                            " does not take host NUMA current; name the node (Location::host_numa(n))");
    const auto bits = static_cast<unsigned>(types);
    if ((bits & ~kKnownHandleTypes) != 0)
        return what.invalid("handle types: unknown bits " + hex(bits & ~kKnownHandleTypes));
    return ok();
}

Result<void> AllocationProperties::validate() const {
    constexpr detail::Operation kProperties{"AllocationProperties"};
    CUDYN_TRY(detail::check_location_and_handle_types(location_, handle_types_, kProperties, "cuMemCreate"));
    if (location_.kind() == LocationKind::Host && handle_types_ != HandleType::None)
        return kProperties.invalid("handle types: plain host allocations are not shareable (the driver wants "
                                   "none); use a host NUMA node");
    return ok();
}

Result<void> AllocationProperties::check_supported() const {
    CUDYN_TRY(validate());
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemCreate_v10020));
    // From the per-device cache: after the first call for a device this asks
    // the driver nothing (a host location asks for the current context's device).
    CUDYN_TRY_ASSIGN(const int ordinal, detail::judging_device(location_));
    CUDYN_TRY_ASSIGN(const auto caps, detail::capabilities(ordinal, "AllocationProperties"));
    // Texts built only on a refusal: this runs on every create.
    const auto on = [ordinal] { return "device " + std::to_string(ordinal); };
    const auto unsupported = [this](const std::string& why) {
        return Error::not_supported({}, describe() + ": " + why);
    };
    switch (location_.kind()) {
        case LocationKind::Device:
            if (!caps.virtual_memory_management)
                // describe() already starts with the device: "device 0: it does not ..."
                return unsupported("it does not support virtual memory management (" +
                                   is_zero(&DeviceCapabilities::virtual_memory_management) + ")");
            break;
        case LocationKind::Host:
            if (!caps.host_virtual_memory_management)
                return unsupported("host VMM allocations are not supported (" +
                                   is_zero(&DeviceCapabilities::host_virtual_memory_management) + " on " + on() + ")");
            break;
        case LocationKind::HostNuma:
        case LocationKind::HostNumaCurrent:
            if (!caps.host_numa_virtual_memory_management)
                return unsupported("host NUMA VMM allocations are not supported (" +
                                   is_zero(&DeviceCapabilities::host_numa_virtual_memory_management) + " on " + on() +
                                   ")");
            break;
    }
    for (const HandleTypeRow& row : kHandleTypes)
        if (includes(handle_types_, row.type) && !(caps.*row.supported))
            return unsupported(std::string(row.name) + " handles are not supported on " + on() + " (" +
                               is_zero(row.supported) + ")");
    if (gpu_direct_rdma_ && !caps.rdma_with_vmm)
        return unsupported("GPUDirect RDMA on VMM memory is not supported on " + on() + " (" +
                           is_zero(&DeviceCapabilities::rdma_with_vmm) + ")");
    return ok();
}

CUmemAllocationProp AllocationProperties::to_cu() const noexcept {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(handle_types_);
    prop.location = location_.to_cu();
    prop.allocFlags.gpuDirectRDMACapable = gpu_direct_rdma_ ? 1 : 0;
    return prop;
}

std::string AllocationProperties::describe() const {
    std::string text = location_.describe();
    if (handle_types_ != HandleType::None) text += ", handles " + to_string(handle_types_);
    if (gpu_direct_rdma_) text += ", GPUDirect RDMA";
    return text;
}

namespace detail {

Result<int> judging_device(const Location& location) {
    if (location.kind() == LocationKind::Device) return location.id();
    auto current = current_context_device();
    if (current) return static_cast<int>(*current);
    if (current.error().driver_result == CUDA_ERROR_INVALID_CONTEXT) return 0;  // none is current
    return std::move(current).error();
}

namespace {

// The driver's granularity answers, by the exact properties asked about and
// the kind asked for: a fact of the device that holds for the process, as
// the capability cache's, and asked on every create and every growth, so
// asked of the driver once. A handful of property sets is the rule; the
// list stops growing at its bound (then the driver is asked each time).
class GranularityAnswers {
public:
    bool find(const CUmemAllocationProp& prop, Granularity which, std::size_t& granularity) {
        const std::lock_guard<std::mutex> lock(mutex_);
        for (const Answer& answer : answers_)
            if (answer.which == which && std::memcmp(&answer.prop, &prop, sizeof prop) == 0) {
                granularity = answer.granularity;
                return true;
            }
        return false;
    }
    void keep(const CUmemAllocationProp& prop, Granularity which, std::size_t granularity) {
        const std::lock_guard<std::mutex> lock(mutex_);
        if (answers_.size() < kMostAnswers) answers_.push_back({prop, which, granularity});
    }
    void forget() noexcept {
        const std::lock_guard<std::mutex> lock(mutex_);
        answers_.clear();
    }

private:
    static constexpr std::size_t kMostAnswers = 64;
    struct Answer {
        CUmemAllocationProp prop;
        Granularity which;
        std::size_t granularity;
    };
    std::mutex mutex_;
    std::vector<Answer> answers_;
};

GranularityAnswers& granularity_answers() {
    static GranularityAnswers* const answers = new GranularityAnswers;  // never destroyed: used until exit
    return *answers;
}

}  // namespace

void forget_granularity_answers() noexcept { granularity_answers().forget(); }

Result<std::size_t> query_granularity(const AllocationProperties& properties, Granularity which) {
    const CUmemAllocationProp prop = properties.to_cu();  // zeroed first: padding compares equal too
    std::size_t granularity = 0;
    if (granularity_answers().find(prop, which, granularity)) return granularity;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAllocationGranularity_v10020, &granularity, &prop,
                          which == Granularity::Minimum ? CU_MEM_ALLOC_GRANULARITY_MINIMUM
                                                        : CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    if (granularity == 0)
        return Error::from_driver(CUDA_ERROR_INVALID_VALUE, "cuMemGetAllocationGranularity",
                                  "the driver reported a granularity of 0 for " + properties.describe());
    granularity_answers().keep(prop, which, granularity);
    return granularity;
}

}  // namespace detail

Result<void> detail::check_properties_for(const AllocationProperties& properties, const Operation& operation) {
    Result<void> checked = properties.validate();
    if (checked) checked = detail::require_entry(&DriverTable::cuMemGetAllocationGranularity_v10020);
    if (checked) checked = properties.check_supported();
    if (!checked) return operation.context(std::move(checked).error());
    return ok();
}

Result<std::size_t> allocation_granularity(const AllocationProperties& properties, Granularity which) {
    CUDYN_TRY(detail::check_properties_for(properties, detail::Operation("allocation_granularity")));
    return detail::query_granularity(properties, which);
}

}  // namespace cudyn
