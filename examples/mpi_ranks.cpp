// mpi_ranks — the ranks of an MPI job agree on what their nodes support, and
// share GPU memory with the ranks on their own host.
//
//   mpirun -np 4 ./build/examples/mpi_ranks [--spread] [--nccl]
//   srun -n 8 --mpi=pmix ./build/examples/mpi_ranks
//
// Every rank reports its driver and devices (cudyn::mpi::survey_ranks), the
// capability trials included; rank 0 prints what all of them share (one line
// of the trials that worked everywhere, with the lowest PTX ISA) and which
// ranks lack what, and the NVLink fabric domains with the pairs of ranks that
// could pass fabric handles. Each rank then fills a buffer with a pattern of its own on
// device 0 (--spread: the ranks of a host take its visible devices in turn),
// exports it as a legacy IPC handle,
// and receives the descriptors of the ranks on its host
// (cudyn::mpi::exchange_descriptors); ranks elsewhere are reported as on
// another host. It opens each, reads it back and checks the peer's pattern.
// One line per rank (with its GPU's UUID), printed by rank 0 in rank order. Exit status 1 on a
// mismatch or an error (an open that failed included), 0 otherwise, also on
// a rank without a driver or legacy IPC (it says so and shares nothing).
// --nccl: the ranks then make an NCCL communicator (the unique id over MPI,
// cudyn::mpi::nccl_communicator) and all-reduce a registered buffer, every
// value checked (NCCL wants one GPU per rank: use it with --spread on GPUs).
#include "example_support.hpp"

#include "cudyn/nccl/registered_memory.hpp"
#include <cudyn/mpi/nccl_communicator.hpp>

#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/loader/load_report.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include <cudyn/mpi/descriptor_exchange.hpp>
#include <cudyn/mpi/fabric_domains.hpp>
#include <cudyn/mpi/ranks.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace cudyn_example;

namespace {

constexpr std::size_t kWords = std::size_t{1} << 16;  // 256 KiB per rank

// Word `index` of rank `rank`'s buffer: different for every rank and word.
std::uint32_t pattern(int rank, std::size_t index) {
    return (static_cast<std::uint32_t>(rank) + 1u) * 0x9E3779B1u ^ static_cast<std::uint32_t>(index);
}

std::string join(const std::vector<int>& ranks) {
    if (ranks.empty()) return "none";
    std::string text;
    for (const int rank : ranks) text += (text.empty() ? "" : " ") + std::to_string(rank);
    return text;
}

// What every rank can rely on, and who lacks what: rank 0's header.
void print_agreement(const cudyn::mpi::RankSurvey& survey) {
    const cudyn::mpi::CapabilityAgreement& agreed = survey.capabilities;
    std::printf("%d ranks on %zu host(s); lowest driver %d, fewest devices %d, lowest compute %d.%d\n",
                agreed.rank_count, survey.hosts.hosts.size(), agreed.min_driver_version, agreed.min_visible_devices,
                agreed.min_compute.major, agreed.min_compute.minor);
    std::string common;
    for (const auto& row : cudyn::device_capability_list)
        if (agreed.common.*row.field) common += std::string(common.empty() ? "" : " ") + row.name;
    std::printf("  every rank: %s\n", common.empty() ? "(nothing)" : common.c_str());
    for (const auto& shortfall : agreed.shortfalls)
        std::printf("  %s: lacking on ranks %s%s%s\n", shortfall.capability, join(shortfall.lacking).c_str(),
                    shortfall.unknown.empty() ? "" : ", unknown to ranks ", shortfall.unknown.empty() ? "" : join(shortfall.unknown).c_str());
    // The capability trials: what really worked on every device of every rank.
    std::string trials;
    for (const char* trial : agreed.common_trials) trials += std::string(trials.empty() ? "" : " ") + trial;
    std::printf("  trials working on every rank: %s; lowest PTX ISA %d.%d\n", trials.empty() ? "(none)" : trials.c_str(),
                agreed.min_ptx_isa / 10, agreed.min_ptx_isa % 10);
    if (!agreed.without_driver.empty()) std::printf("  no usable driver: ranks %s\n", join(agreed.without_driver).c_str());
    for (std::size_t host = 0; host < survey.hosts.hosts.size(); ++host)
        std::printf("  host %zu, %s: ranks %s\n", host, survey.hosts.hosts[host].describe().c_str(),
                    join(survey.hosts.ranks_of_host[host]).c_str());
    // NVLink fabric domains (from NVML, where the ranks have it): fabric
    // handles reach across hosts, inside one domain.
    const cudyn::mpi::FabricDomains fabric = cudyn::mpi::group_by_fabric_domain(survey.records);
    for (std::size_t d = 0; d < fabric.domains.size(); ++d)
        std::printf("  NVLink domain %zu, cluster %s clique %u: ranks %s\n", d,
                    fabric.domains[d].cluster_uuid.to_string().c_str() + 4, fabric.domains[d].clique_id,
                    join(fabric.domains[d].ranks).c_str());
    std::string pairs;
    for (const auto& [a, b] : fabric.fabric_pairs)
        pairs += (pairs.empty() ? "" : " ") + std::to_string(a) + "-" + std::to_string(b);
    std::printf("  fabric handles could pass between ranks: %s\n", pairs.empty() ? "(none)" : pairs.c_str());
}

// Rank 0 prints every rank's line, in rank order (mpirun would interleave them).
void print_in_rank_order(const std::string& line, int rank, int size) {
    const int length = static_cast<int>(line.size());
    std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size && rank == 0; ++r) {
        offsets[static_cast<std::size_t>(r)] = total;
        total += lengths[static_cast<std::size_t>(r)];
    }
    std::vector<char> all(static_cast<std::size_t>(total) + 1);
    MPI_Gatherv(line.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                MPI_COMM_WORLD);
    if (rank == 0) std::fwrite(all.data(), 1, static_cast<std::size_t>(total), stdout);
    std::fflush(stdout);
}

// This rank's part: its buffer, filled and exported; the error instead where
// it has none. `memory` keeps the buffer alive until every peer closed it.
cudyn::Result<cudyn::IpcMemoryDescriptor> share(int rank, int ordinal, std::optional<cudyn::PrimaryContext>& context,
                                             std::optional<cudyn::DeviceBuffer<std::uint32_t>>& memory) {
    CUDYN_TRY_ASSIGN(auto active, activate_device(ordinal));
    context = std::move(active);
    CUDYN_TRY_ASSIGN(auto buffer, cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
    std::vector<std::uint32_t> words(kWords);
    for (std::size_t i = 0; i < kWords; ++i) words[i] = pattern(rank, i);
    CUDYN_TRY(buffer.copy_from(words));  // synchronous: the bytes are there when a peer opens them
    memory = std::move(buffer);
    return cudyn::export_ipc_memory(*memory);
}

// Opens a peer's buffer, reads it back and checks the peer's pattern: an
// empty string when it matches, else what went wrong.
std::string check_peer(const cudyn::mpi::PeerDescriptor<cudyn::IpcMemoryDescriptor>& peer) {
    auto opened = cudyn::import_ipc_memory(*peer.descriptor);
    if (!opened) return "open failed: " + opened.error().describe();
    auto words = opened->device_span_as<std::uint32_t>();
    if (!words) return words.error().describe();
    std::vector<std::uint32_t> read(words->size());
    if (auto copied = words->copy_to(read); !copied) return "read failed: " + copied.error().describe();
    if (read.size() != kWords) return std::to_string(read.size()) + " words shared, " + std::to_string(kWords) + " expected";
    for (std::size_t i = 0; i < read.size(); ++i)
        if (read[i] != pattern(peer.rank, i)) {
            char text[96];
            std::snprintf(text, sizeof text, "word %zu is 0x%08x, rank %d wrote 0x%08x", i, read[i], peer.rank,
                          pattern(peer.rank, i));
            return text;
        }
    return {};  // closed by the destructor (cuIpcCloseMemHandle)
}

}  // namespace

// Every rank (collective): an NCCL communicator over MPI_COMM_WORLD and an
// all-reduce of a registered buffer holding rank + 1 in every word. Skipped
// on every rank when any rank has no context (`ready`).
std::string nccl_all_reduce(int rank, int size, bool ready) {
    int everyone = ready ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (everyone == 0) return "NCCL skipped (a rank has no device)";
    auto comm = cudyn::mpi::nccl_communicator(MPI_COMM_WORLD);
    if (!comm) {
        const bool absent = comm.error().code == cudyn::ErrorCode::DriverNotFound;
        return std::string(absent ? "no NCCL: " : "NCCL FAILED: ") + comm.error().describe();
    }
    auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords);
    if (!buffer) return "NCCL FAILED: " + buffer.error().describe();
    if (auto filled = buffer->fill(static_cast<std::uint32_t>(rank + 1)); !filled)
        return "NCCL FAILED: " + filled.error().describe();
    auto registered = cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<std::uint32_t>>::create(*comm, std::move(*buffer));
    if (!registered) return "NCCL FAILED: " + registered.error().describe();
    const cudyn::DeviceSpan<std::uint32_t> words = registered->memory().device_span();
    if (auto reduced = comm->all_reduce<std::uint32_t>(words, words, cudyn::NcclReduction::Sum); !reduced)
        return "NCCL FAILED: " + reduced.error().describe();
    std::vector<std::uint32_t> sums(kWords);
    if (auto read = words.copy_to(cudyn::HostSpan<std::uint32_t>(sums)); !read)
        return "NCCL FAILED: " + read.error().describe();
    const auto expected = static_cast<std::uint32_t>(size * (size + 1) / 2);
    for (const std::uint32_t sum : sums)
        if (sum != expected) return "NCCL all-reduce FAILED: " + std::to_string(sum) + " != " + std::to_string(expected);
    return "NCCL all-reduce of registered memory: " + std::to_string(expected) + " in every word";
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool spread = false, nccl = false;
    for (int i = 1; i < argc; ++i) {
        spread = spread || std::strcmp(argv[i], "--spread") == 0;
        nccl = nccl || std::strcmp(argv[i], "--nccl") == 0;
    }

    // Collective; its errors are the same on every rank, so all stop here together.
    auto survey = cudyn::mpi::survey_ranks(MPI_COMM_WORLD);
    if (!survey) {
        if (rank == 0) fail("survey_ranks", survey.error());
        MPI_Finalize();
        return 1;
    }
    if (rank == 0) print_agreement(*survey);

    const cudyn::mpi::RankRecord& mine = survey->records[static_cast<std::size_t>(rank)];
    int ordinal = 0;
    if (spread && mine.visible_devices > 0) {
        const auto& neighbours = survey->hosts.ranks_of_host[static_cast<std::size_t>(survey->hosts.host_of_rank[static_cast<std::size_t>(rank)])];
        for (std::size_t i = 0; i < neighbours.size(); ++i)
            if (neighbours[i] == rank) ordinal = static_cast<int>(i) % mine.visible_devices;
    }

    std::optional<cudyn::PrimaryContext> context;
    std::optional<cudyn::DeviceBuffer<std::uint32_t>> memory;
    const auto exported = share(rank, ordinal, context, memory);
    // Every rank takes part, with its descriptor or with the reason it has none.
    auto peers = cudyn::mpi::exchange_descriptors(MPI_COMM_WORLD, *survey, exported);

    bool failed = false;
    // The GPU by its UUID too: ordinals differ between ranks with different
    // CUDA_VISIBLE_DEVICES, the UUID does not.
    std::string gpu;
    for (const cudyn::mpi::DeviceReport& device : mine.devices)
        if (device.ordinal == ordinal && device.uuid) gpu = " (" + device.uuid->to_string() + ")";
    std::string line = "rank " + std::to_string(rank) + " on " + mine.host.host_name + ", device " +
                       std::to_string(ordinal) + gpu + ": ";
    if (exported) {
        line += "shared " + std::to_string(kWords * sizeof(std::uint32_t)) + " bytes";
    } else {
        // No driver or no legacy IPC here is this machine's answer, not the example's failure.
        const cudyn::ErrorCode why = exported.error().code;
        const bool unsupported = why == cudyn::ErrorCode::NotSupported || why == cudyn::ErrorCode::DriverNotFound ||
                                 why == cudyn::ErrorCode::StubDriver || why == cudyn::ErrorCode::DriverInitFailed ||
                                 why == cudyn::ErrorCode::DriverRefused;
        failed = failed || !unsupported;
        line += std::string(unsupported ? "shares nothing (not supported here: " : "FAILED to share (") +
                exported.error().describe() + ")";
    }
    std::vector<int> checked, elsewhere, without;
    if (!peers) {
        failed = true;
        line += "; exchange FAILED: " + peers.error().describe();
    } else {
        for (const auto& peer : *peers) {
            switch (peer.status) {
                case cudyn::mpi::PeerStatus::Received:
                    if (!exported) break;  // no context to open it in
                    if (const std::string problem = check_peer(peer); problem.empty()) {
                        checked.push_back(peer.rank);
                    } else {
                        failed = true;
                        line += "; rank " + std::to_string(peer.rank) + " MISMATCH: " + problem;
                    }
                    break;
                case cudyn::mpi::PeerStatus::DifferentHost: elsewhere.push_back(peer.rank); break;
                case cudyn::mpi::PeerStatus::NothingShared: without.push_back(peer.rank); break;
                case cudyn::mpi::PeerStatus::Malformed:
                    failed = true;
                    line += "; " + peer.descriptor.error().describe();
                    break;
                case cudyn::mpi::PeerStatus::Self: break;
            }
        }
    }
    line += "; checked ranks " + join(checked) + "; on other hosts: " + join(elsewhere) +
            "; shared nothing: " + join(without);
    if (nccl) {
        const std::string answer = nccl_all_reduce(rank, size, exported.has_value());
        failed = failed || answer.find("FAILED") != std::string::npos;
        line += "; " + answer;
    }
    line += std::string(failed ? " [FAILED]" : " [ok]") + "\n";

    // Every opened handle is closed (check_peer's ImportedIpcMemory is gone) before
    // any exporter frees its buffer: CUDA leaves freeing first undefined.
    MPI_Barrier(MPI_COMM_WORLD);
    memory.reset();
    print_in_rank_order(line, rank, size);
    MPI_Finalize();
    return failed ? 1 : 0;
}
