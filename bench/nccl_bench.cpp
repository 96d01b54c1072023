// cudyn-nccl-bench: NCCL all-reduce over cudyn memory, registered and not,
// against memory from ncclMemAlloc (registered), on two GPUs, one process
// each (the program forks its second rank before either touches the driver;
// the unique id travels over an FdChannel). Then the cost of keeping a
// GrowableBuffer registered as it grows.
//
//   cudyn-nccl-bench [--max-mib N] [--growth-steps N] [--json PATH]
//
// Bus bandwidth of an all-reduce of B bytes over n ranks is B / t * 2(n-1)/n:
// B / t for two. Each case: 5 warm-up collectives, then a timed run of
// in-place float sums on one stream (the host's clock around the run and the
// stream's synchronize); the median of 5 runs. Rank 0 prints.
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/nccl/nccl_channel.hpp"
#include "cudyn/nccl/nccl_library.hpp"
#include "cudyn/nccl/nccl_memory.hpp"
#include "cudyn/nccl/registered_growable_buffer.hpp"
#include "cudyn/nccl/registered_memory.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what, const cudyn::Error& error) {
    std::fprintf(stderr, "%s failed: %s\n", what, error.describe().c_str());
    std::fflush(nullptr);
    std::_Exit(1);
}

template <typename T>
T take(const char* what, cudyn::Result<T> result) {
    if (!result) die(what, result.error());
    return std::move(*result);
}
void take(const char* what, const cudyn::Result<void>& result) {
    if (!result) die(what, result.error());
}

// ncclMemAlloc, ncclMemFree, ncclCommRegister, ncclCommDeregister of the NCCL cudyn opened.
struct RawNccl {
    int (*mem_alloc)(void**, std::size_t) = nullptr;
    int (*mem_free)(void*) = nullptr;
    int (*comm_register)(void*, void*, std::size_t, void**) = nullptr;
    int (*comm_deregister)(void*, void*) = nullptr;
    RawNccl() {
        void* library = ::dlopen(cudyn::nccl_report().library_path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
        if (library == nullptr) return;
        mem_alloc = reinterpret_cast<decltype(mem_alloc)>(::dlsym(library, "ncclMemAlloc"));
        mem_free = reinterpret_cast<decltype(mem_free)>(::dlsym(library, "ncclMemFree"));
        comm_register = reinterpret_cast<decltype(comm_register)>(::dlsym(library, "ncclCommRegister"));
        comm_deregister = reinterpret_cast<decltype(comm_deregister)>(::dlsym(library, "ncclCommDeregister"));
    }
};

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// Median seconds of one in-place all-reduce of `span`.
double time_all_reduce(cudyn::NcclCommunicator& comm, const cudyn::Stream& stream, cudyn::DeviceSpan<float> span) {
    const int iterations = span.size_bytes() <= (std::size_t{64} << 20) ? 20 : 6;
    for (int i = 0; i < 5; ++i) take("warm-up", comm.all_reduce<float>(span, span, cudyn::NcclReduction::Sum, stream));
    take("synchronize", stream.synchronize());
    std::vector<double> runs;
    for (int run = 0; run < 5; ++run) {
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i)
            take("all_reduce", comm.all_reduce<float>(span, span, cudyn::NcclReduction::Sum, stream));
        take("synchronize", stream.synchronize());
        runs.push_back(std::chrono::duration<double>(Clock::now() - start).count() / iterations);
    }
    return median(runs);
}

struct Row {
    std::string memory;
    std::size_t bytes;
    double seconds;
};

int run(cudyn::FdChannel& channel, int rank, std::size_t max_bytes, int growth_steps, const char* json_path) {
    const auto context = take("activate", cudyn::PrimaryContext::activate(take("device", cudyn::Device::get(rank))));
    auto comm = take("communicator", rank == 0 ? cudyn::nccl_communicator_as_root({&channel})
                                               : cudyn::nccl_communicator_from_root(channel));
    const cudyn::Stream stream = take("stream", cudyn::Stream::create());
    const RawNccl raw;
    if (rank == 0) std::printf("NCCL %d from %s\n", cudyn::nccl_report().version, cudyn::nccl_report().library_path.c_str());
    std::vector<Row> rows;
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
        const std::size_t count = bytes / sizeof(float);
        const auto record = [&](const char* memory, double seconds) { rows.push_back({memory, bytes, seconds}); };
        {
            auto buffer = take("DeviceBuffer", cudyn::DeviceBuffer<float>::allocate(count));
            take("fill", buffer.fill(1.0f));
            record("device-buffer", time_all_reduce(comm, stream, buffer.device_span()));
            auto registered =
                take("register", cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<float>>::create(comm, std::move(buffer)));
            record("device-buffer-registered", time_all_reduce(comm, stream, registered.memory().device_span()));
        }
        {
            // One chunk the size of the buffer: one physical allocation, as ncclMemAlloc makes.
            const auto granularity =
                take("granularity", cudyn::allocation_granularity(take("properties", cudyn::nccl_allocation_properties(rank)),
                                                                  cudyn::Granularity::Recommended));
            const std::size_t chunk = (bytes + granularity - 1) / granularity * granularity;
            auto buffer = take("GrowableBuffer", cudyn::create_nccl_growable_buffer(rank, chunk, bytes, chunk));
            const auto span = take("subspan", take("span", buffer.device_span_as<float>()).subspan(0, count));
            take("fill", span.fill(1.0f));
            record("nccl-vmm", time_all_reduce(comm, stream, span));
            auto registered = take("register", cudyn::NcclRegisteredGrowableBuffer::create(comm, std::move(buffer)));
            record("nccl-vmm-registered", time_all_reduce(comm, stream, span));
        }
        if (raw.mem_alloc != nullptr && raw.comm_register != nullptr) {
            void* pointer = nullptr;
            if (raw.mem_alloc(&pointer, bytes) != 0) die("ncclMemAlloc", cudyn::Error::invalid_argument("refused"));
            void* handle = nullptr;
            if (raw.comm_register(comm.native_handle(), pointer, bytes, &handle) != 0)
                die("ncclCommRegister", cudyn::Error::invalid_argument("refused"));
            const cudyn::DeviceSpan<float> span(reinterpret_cast<CUdeviceptr>(pointer), count);
            take("fill", span.fill(1.0f));
            record("ncclMemAlloc-registered", time_all_reduce(comm, stream, span));
            raw.comm_deregister(comm.native_handle(), handle);
            raw.mem_free(pointer);
        }
    }
    // Growth: the cost of growing by one chunk, registered and not, and of the
    // first all-reduce over the grown buffer against the next one.
    struct Growth {
        std::string what;
        double seconds;
    };
    std::vector<Growth> growth;
    for (const bool registered : {false, true}) {
        auto buffer = take("GrowableBuffer", cudyn::create_nccl_growable_buffer(rank, std::size_t{1} << 30));
        const std::size_t chunk = buffer.chunk_size_bytes();
        take("grow", buffer.grow_to(chunk));
        cudyn::NcclRegisteredGrowableBuffer kept;
        if (registered) kept = take("register", cudyn::NcclRegisteredGrowableBuffer::create(comm, std::move(buffer)));
        const auto size = [&] { return registered ? kept.buffer().size_bytes() : buffer.size_bytes(); };
        const auto span = [&] {
            return take("span", registered ? kept.buffer().device_span_as<float>() : buffer.device_span_as<float>());
        };
        std::vector<double> grows, firsts, seconds;
        for (int step = 0; step < growth_steps; ++step) {
            const std::size_t target = size() + chunk;
            const auto start = Clock::now();
            take("grow", registered ? kept.grow_to(target) : buffer.grow_to(target));
            grows.push_back(std::chrono::duration<double>(Clock::now() - start).count());
            const auto words = span();
            take("fill", words.fill(1.0f));
            for (auto* times : {&firsts, &seconds}) {
                const auto begin = Clock::now();
                take("all_reduce", comm.all_reduce<float>(words, words, cudyn::NcclReduction::Sum, stream));
                take("synchronize", stream.synchronize());
                times->push_back(std::chrono::duration<double>(Clock::now() - begin).count());
            }
        }
        const std::string kind = registered ? "registered" : "unregistered";
        const std::string chunk_text = std::to_string(chunk >> 20) + " MiB chunk";
        growth.push_back({"grow_to(+1 " + chunk_text + "), " + kind, median(grows)});
        growth.push_back({"first all-reduce after growth, " + kind, median(firsts)});
        growth.push_back({"second all-reduce after growth, " + kind, median(seconds)});
    }
    take("finalize", comm.finalize());
    if (rank != 0) return 0;
    std::printf("\n%-26s %10s %14s %12s\n", "memory", "MiB", "busbw GB/s", "vs ncclMem");
    std::FILE* json = json_path != nullptr ? std::fopen(json_path, "w") : nullptr;
    if (json != nullptr) std::fprintf(json, "{\"all_reduce\": [\n");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& row = rows[i];
        double reference = 0;
        for (const Row& other : rows)
            if (other.bytes == row.bytes && other.memory == "ncclMemAlloc-registered") reference = other.seconds;
        const double busbw = static_cast<double>(row.bytes) / row.seconds / 1e9;
        const double ratio = reference > 0 ? reference / row.seconds : 0;
        std::printf("%-26s %10zu %14.2f %12.3f\n", row.memory.c_str(), row.bytes >> 20, busbw, ratio);
        if (json != nullptr)
            std::fprintf(json, "  {\"memory\": \"%s\", \"bytes\": %zu, \"seconds\": %.9f, \"busbw_gbs\": %.3f, \"vs_ncclmemalloc\": %.4f}%s\n",
                         row.memory.c_str(), row.bytes, row.seconds, busbw, ratio, i + 1 < rows.size() ? "," : "");
    }
    std::printf("\n%-60s %12s\n", "growth", "us (median)");
    if (json != nullptr) std::fprintf(json, "], \"growth\": [\n");
    for (std::size_t i = 0; i < growth.size(); ++i) {
        std::printf("%-60s %12.1f\n", growth[i].what.c_str(), growth[i].seconds * 1e6);
        if (json != nullptr)
            std::fprintf(json, "  {\"what\": \"%s\", \"seconds\": %.9f}%s\n", growth[i].what.c_str(), growth[i].seconds,
                         i + 1 < growth.size() ? "," : "");
    }
    if (json != nullptr) {
        std::fprintf(json, "]}\n");
        std::fclose(json);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t max_bytes = std::size_t{1} << 30;
    const char* json_path = nullptr;
    int growth_steps = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--max-mib") == 0) max_bytes = std::strtoull(argv[i + 1], nullptr, 10) << 20;
        if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
        if (std::strcmp(argv[i], "--growth-steps") == 0) growth_steps = std::max(1, std::atoi(argv[i + 1]));
    }
    // Before any driver call: a process that used the driver must not fork.
    auto ends = cudyn::FdChannel::pair();
    if (!ends) die("FdChannel::pair", ends.error());
    const pid_t child = ::fork();
    if (child < 0) return 1;
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a rank left alone would wait in NCCL for ever
        const int status = run(ends->second, 1, max_bytes, growth_steps, nullptr);
        std::fflush(nullptr);
        std::_Exit(status);
    }
    const int status = run(ends->first, 0, max_bytes, growth_steps, json_path);
    int child_status = 0;
    ::waitpid(child, &child_status, 0);
    return status != 0 ? status : (WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 1);
}
