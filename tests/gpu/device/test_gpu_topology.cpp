// gpu suite: which physical device each ordinal is, how the devices are
// connected, and the NVLink fabric, against the real driver, NVML and (where
// CUDYN_TEST_NVIDIA_SMI names nvidia-smi) what nvidia-smi says of the same
// GPUs. nvidia-smi numbers GPUs its own way, so every comparison goes
// through the UUID.
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"  // take

#include "cudyn/device/device.hpp"
#include "cudyn/device/topology.hpp"
#include "cudyn/nvml/gpu_fabric.hpp"
#include "cudyn/nvml/nvlink.hpp"
#include "cudyn/nvml/nvml_library.hpp"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using cudyn_test::take;

namespace {

std::vector<cudyn::Device> all_devices() {
    std::vector<cudyn::Device> devices;
    const int count = take(cudyn::Device::count());
    for (int ordinal = 0; ordinal < count; ++ordinal) devices.push_back(take(cudyn::Device::get(ordinal)));
    return devices;
}

// nvidia-smi's output for these arguments; empty (and the caller skips)
// where CUDYN_TEST_NVIDIA_SMI is unset.
std::string nvidia_smi(const std::string& arguments) {
    std::string output;
#if !defined(_WIN32)
    const char* smi = std::getenv("CUDYN_TEST_NVIDIA_SMI");
    if (smi == nullptr || *smi == '\0') return output;
    FILE* pipe = ::popen((std::string("'") + smi + "' " + arguments).c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
    REQUIRE(::pclose(pipe) == 0);
#else
    (void)arguments;
#endif
    return output;
}

std::string trimmed(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// nvidia-smi's index of each GPU, by UUID ("GPU 0: NVIDIA H200 (UUID: GPU-...)").
std::map<std::string, int> smi_indices_by_uuid() {
    std::map<std::string, int> indices;
    std::istringstream lines(nvidia_smi("-L"));
    for (std::string line; std::getline(lines, line);) {
        const auto uuid_at = line.find("(UUID: ");
        if (line.rfind("GPU ", 0) != 0 || uuid_at == std::string::npos) continue;
        const std::string uuid = line.substr(uuid_at + 7, line.find(')', uuid_at) - uuid_at - 7);
        indices[uuid] = std::atoi(line.c_str() + 4);
    }
    return indices;
}

}  // namespace

TEST_CASE("every device's UUID and PCI bus id find it again, and nvidia-smi names the same", "[gpu][identity]") {
    const auto devices = all_devices();
    REQUIRE_FALSE(devices.empty());
    std::map<std::string, int> seen;
    for (const cudyn::Device& device : devices) {
        const cudyn::DeviceUuid uuid = take(device.uuid());
        const cudyn::PciBusId bus = take(device.pci_bus_id());
        INFO("device " << device.ordinal() << ": " << uuid.to_string() << " at " << bus.to_string());
        CHECK_FALSE(uuid.is_zero());
        CHECK(seen.emplace(uuid.to_string(), device.ordinal()).second);  // distinct
        CHECK(take(cudyn::Device::by_uuid(uuid)).ordinal() == device.ordinal());
        CHECK(take(cudyn::Device::by_pci_bus_id(bus.to_string())).ordinal() == device.ordinal());
        CHECK(bus.bus == static_cast<std::uint32_t>(take(device.attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID))));
        CHECK(take(cudyn::DeviceUuid::parse(uuid.to_string())) == uuid);
        std::printf("device %d: %s, PCI %s\n", device.ordinal(), uuid.to_string().c_str(), bus.to_string().c_str());
    }
    // No such device: the driver's answer to a bus id nobody has, as cudyn words it.
    auto nowhere = cudyn::Device::by_pci_bus_id("0000:FF:1F.7");
    REQUIRE_FALSE(nowhere.has_value());
    CHECK(nowhere.error().code == cudyn::ErrorCode::InvalidArgument);
    CHECK(nowhere.error().message.find("0000:FF:1F.7") != std::string::npos);
    cudyn::DeviceUuid unknown;
    unknown.bytes.fill(0x5a);
    auto nobody = cudyn::Device::by_uuid(unknown);
    REQUIRE_FALSE(nobody.has_value());
    CHECK(nobody.error().code == cudyn::ErrorCode::InvalidArgument);

    const auto smi = smi_indices_by_uuid();
    if (smi.empty()) {
        WARN("CUDYN_TEST_NVIDIA_SMI unset: not compared with nvidia-smi -L");
        return;
    }
    for (const auto& [uuid, ordinal] : seen) {
        INFO("device " << ordinal << ": " << uuid);
        CHECK(smi.count(uuid) == 1);  // nvidia-smi -L lists every GPU, visible to CUDA or not
        // nvidia-smi's bus id (eight-digit domain) of the same GPU is the driver's.
        const std::string smi_bus = trimmed(nvidia_smi("--query-gpu=pci.bus_id --format=csv,noheader -i " + uuid));
        CHECK(take(cudyn::PciBusId::parse(smi_bus)) == take(take(cudyn::Device::get(ordinal)).pci_bus_id()));
    }
}

TEST_CASE("the topology matches nvidia-smi's peer matrix", "[gpu][multi-gpu]") {
    const auto devices = all_devices();
    REQUIRE(devices.size() >= 2);
    const cudyn::Topology topology = take(cudyn::probe_topology());
    REQUIRE(topology.device_count == static_cast<int>(devices.size()));
    REQUIRE(topology.links.size() == devices.size() * (devices.size() - 1));
    for (const cudyn::PeerLink& link : topology.links) {
        std::printf("GPU%d -> GPU%d: peer %s, rank %d, atomics %s, arrays %s, %zu atomic capability words\n", link.from,
                    link.to, link.can_access_peer ? "yes" : "no", link.attributes.performance_rank,
                    link.attributes.native_atomic_supported ? "yes" : "no",
                    link.attributes.cuda_array_access_supported ? "yes" : "no", link.atomic_capabilities.size());
        CHECK(link.attributes.access_supported == link.can_access_peer);
        CHECK(link.atomic_capabilities.size() ==
              (cudyn::has_entry(&cudyn::DriverTable::cuDeviceGetP2PAtomicCapabilities_v13000) ? std::size_t{CU_ATOMIC_OPERATION_MAX} : 0u));
    }
    const auto smi = smi_indices_by_uuid();
    if (smi.empty()) {
        WARN("CUDYN_TEST_NVIDIA_SMI unset: not compared with nvidia-smi topo -p2p r");
        return;
    }
    // "nvidia-smi topo -p2p r": a header row of GPU names (GPU0 GPU1 ...),
    // then one row per GPU: its name and one cell per column (X, OK, NS,
    // CNS, ...); the legend below starts with other words.
    std::map<int, std::vector<std::string>> matrix;
    std::istringstream lines(nvidia_smi("topo -p2p r"));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::vector<std::string> cells;
        for (std::string cell; words >> cell;) cells.push_back(cell);
        if (cells.size() < 2 || cells[0].rfind("GPU", 0) != 0 || cells[1].rfind("GPU", 0) == 0) continue;
        matrix[std::atoi(cells[0].c_str() + 3)] = std::vector<std::string>(cells.begin() + 1, cells.end());
    }
    std::printf("%s", nvidia_smi("topo -m").c_str());
    for (const cudyn::PeerLink& link : topology.links) {
        const std::string from = take(devices[static_cast<std::size_t>(link.from)].uuid()).to_string();
        const std::string to = take(devices[static_cast<std::size_t>(link.to)].uuid()).to_string();
        REQUIRE(smi.count(from) == 1);
        REQUIRE(smi.count(to) == 1);
        const int row = smi.at(from);
        const auto column = static_cast<std::size_t>(smi.at(to));
        REQUIRE(matrix.count(row) == 1);
        REQUIRE(column < matrix.at(row).size());
        const std::string& cell = matrix.at(row)[column];
        INFO("GPU" << link.from << " -> GPU" << link.to << ": nvidia-smi says " << cell);
        CHECK(link.can_access_peer == (cell == "OK"));
    }
}

TEST_CASE("NVML: fabric and NVLink states answer for every device, as nvidia-smi -q says", "[gpu][identity]") {
    const cudyn::NvmlReport& nvml = cudyn::nvml_report();
    std::printf("NVML %s (%s), kernel module %s\n", cudyn::to_string(nvml.state), nvml.library_path.c_str(),
                nvml.kernel_driver_version.c_str());
    if (nvml.state != cudyn::NvmlState::Loaded) {
        WARN("NVML not loaded: " << nvml.message);
        return;
    }
    CHECK_FALSE(nvml.kernel_driver_version.empty());
    for (const cudyn::Device& device : all_devices()) {
        const cudyn::DeviceUuid uuid = take(device.uuid());
        auto links = cudyn::nvlink_states(uuid);
        REQUIRE(links.has_value());
        std::size_t active = 0;
        for (const cudyn::NvLinkState& l : *links) active += l.active ? 1 : 0;
        std::printf("device %d: %zu of %zu NVLinks active\n", device.ordinal(), active, links->size());
        auto fabric = cudyn::gpu_fabric(uuid);
        if (!fabric) {
            // Only NotSupported may stop the query: an NVML older than 550, or
            // a GPU NVML says has no fabric at all.
            CHECK(fabric.error().code == cudyn::ErrorCode::NotSupported);
            WARN(fabric.error().describe());
            continue;
        }
        std::printf("device %d: fabric %s, status %d, cluster %s, clique %u, health mask 0x%x, %s\n",
                    device.ordinal(), cudyn::to_string(fabric->state), fabric->status,
                    fabric->cluster_uuid.to_string().c_str(), fabric->clique_id, fabric->health_mask,
                    fabric->healthy() ? "healthy" : fabric->problems().c_str());
        // nvidia-smi -q's Fabric block: "State : Completed" (or N/A without a
        // fabric), then its status, clique id and cluster UUID, each "Key : value"
        // one level deeper than "Fabric".
        std::istringstream lines(nvidia_smi("-q -i " + uuid.to_string()));
        std::map<std::string, std::string> block;
        std::size_t fabric_indent = std::string::npos;
        for (std::string line; std::getline(lines, line);) {
            const std::size_t indent = line.find_first_not_of(' ');
            if (indent == std::string::npos) continue;
            if (fabric_indent == std::string::npos) {
                if (trimmed(line) == "Fabric") fabric_indent = indent;
                continue;
            }
            if (indent <= fabric_indent) break;  // the next block
            const std::size_t colon = line.find(':');
            if (colon != std::string::npos) block[trimmed(line.substr(0, colon))] = trimmed(line.substr(colon + 1));
        }
        if (fabric_indent == std::string::npos) {
            WARN("nvidia-smi -q printed no Fabric block (or CUDYN_TEST_NVIDIA_SMI is unset)");
            continue;
        }
        for (const auto& [key, value] : block) std::printf("  nvidia-smi -q Fabric: %s : %s\n", key.c_str(), value.c_str());
        REQUIRE(block.count("State") == 1);
        const std::string state = block["State"];
        INFO("nvidia-smi -q: Fabric State : " << state);
        const std::map<std::string, cudyn::FabricState> states = {
            {"Completed", cudyn::FabricState::Completed},       {"In Progress", cudyn::FabricState::InProgress},
            {"Not Started", cudyn::FabricState::NotStarted},    {"N/A", cudyn::FabricState::NotSupported},
            {"Not Supported", cudyn::FabricState::NotSupported}};
        REQUIRE(states.count(state) == 1);
        CHECK(states.at(state) == fabric->state);
        if (fabric->state != cudyn::FabricState::Completed) continue;
        // The cluster UUID as nvidia-smi spells it (no "GPU-" prefix; case aside).
        const auto lower = [](std::string text) {
            for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            return text;
        };
        const std::string cluster = lower(fabric->cluster_uuid.to_string().substr(4));
        bool compared = false;
        for (const auto& [key, value] : block) {
            const std::string name = lower(key);
            if (name.find("cluster") != std::string::npos && name.find("uuid") != std::string::npos) {
                CHECK(lower(value) == cluster);
                compared = true;
            } else if (name.find("clique") != std::string::npos) {
                CHECK(value == std::to_string(fabric->clique_id));
                compared = true;
            }
        }
        if (!compared) WARN("nvidia-smi -q's Fabric block has no cluster UUID or clique id to compare");
    }
}
