// cudyn — the peer matrix of every visible device pair.
#include "cudyn/device/topology.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"

#include <string>

namespace cudyn {

namespace {

constexpr detail::Operation kProbe{"probe_topology"};

Result<std::vector<unsigned int>> atomic_capabilities(const Device& from, const Device& to) {
    std::vector<unsigned int> capabilities;
    if (!has_entry(&DriverTable::cuDeviceGetP2PAtomicCapabilities_v13000)) return capabilities;
    CUatomicOperation operations[CU_ATOMIC_OPERATION_MAX];
    for (int op = 0; op < CU_ATOMIC_OPERATION_MAX; ++op) operations[op] = static_cast<CUatomicOperation>(op);
    capabilities.assign(CU_ATOMIC_OPERATION_MAX, 0u);
    CUDYN_TRY(call_driver(&DriverTable::cuDeviceGetP2PAtomicCapabilities_v13000, capabilities.data(), operations,
                          static_cast<unsigned int>(CU_ATOMIC_OPERATION_MAX), from.handle(), to.handle()));
    return capabilities;
}

Result<PeerLink> probe_link(const Device& from, const Device& to) {
    PeerLink link;
    link.from = from.ordinal();
    link.to = to.ordinal();
    CUDYN_TRY_ASSIGN(link.can_access_peer, from.can_access_peer(to));
    CUDYN_TRY_ASSIGN(link.attributes, peer_attributes(from, to));
    CUDYN_TRY_ASSIGN(link.atomic_capabilities, atomic_capabilities(from, to));
    return link;
}

}  // namespace

const PeerLink* Topology::link(int from, int to) const noexcept {
    if (from < 0 || to < 0 || from >= device_count || to >= device_count || from == to) return nullptr;
    // Row `from` holds device_count - 1 links, skipping the diagonal.
    const std::size_t index = static_cast<std::size_t>(from) * static_cast<std::size_t>(device_count - 1) +
                              static_cast<std::size_t>(to < from ? to : to - 1);
    return index < links.size() ? &links[index] : nullptr;
}

bool Topology::all_pairs_peer_access() const noexcept {
    for (const PeerLink& l : links)
        if (!l.can_access_peer) return false;
    return true;
}

Result<Topology> probe_topology() {
    CUDYN_TRY_ASSIGN(const int count, Device::count());
    std::vector<Device> devices;
    devices.reserve(static_cast<std::size_t>(count));
    for (int ordinal = 0; ordinal < count; ++ordinal) {
        CUDYN_TRY_ASSIGN(Device device, Device::get(ordinal));
        devices.push_back(device);
    }
    Topology topology;
    topology.device_count = count;
    for (const Device& from : devices) {
        for (const Device& to : devices) {
            if (from.ordinal() == to.ordinal()) continue;
            auto link = probe_link(from, to);
            if (!link) {
                Error error = std::move(link).error();
                error.message = "device " + std::to_string(from.ordinal()) + " -> device " +
                                std::to_string(to.ordinal()) + ": " + error.message;
                return kProbe.context(std::move(error));
            }
            topology.links.push_back(std::move(*link));
        }
    }
    return topology;
}

}  // namespace cudyn
