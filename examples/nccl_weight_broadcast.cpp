// The trainer-to-inference weight broadcast over NCCL, on memory cudyn owns.
//
// Two processes, one GPU each: the trainer (rank 0, device 0) and the
// receiver (rank 1, device 1; --receiver-device N). They meet over an
// FdChannel (the unique id travels there, no second channel), and each keeps
// its weights in a GrowableBuffer with the properties NCCL asks for,
// registered with the communicator as it grows. Every step the trainer's
// model grows by a chunk: it tells the receiver the new size, both grow
// (the new chunk is registered before it is used), the trainer writes the
// weights and broadcasts them, and the receiver checks every value landed in
// place. The program forks its receiver before either side touches the driver.
//
//   nccl_weight_broadcast [--steps N] [--receiver-device N]
//
// NCCL is found as cudyn finds it (CUDYN_NCCL_PATH, libnccl.so.2, or the
// nvidia-nccl wheel); keep NCCL_NVLS_ENABLE=0 on shared machines.
#include "example_support.hpp"

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/nccl/nccl_channel.hpp"
#include "cudyn/nccl/nccl_library.hpp"
#include "cudyn/nccl/nccl_memory.hpp"
#include "cudyn/nccl/registered_growable_buffer.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using cudyn_example::fail;
using cudyn_example::unsupported_or_fail;

constexpr std::uint32_t kSizeTag = 1;
constexpr std::size_t kCapacity = std::size_t{256} << 20;

std::uint32_t weight(int step, std::size_t index) { return static_cast<std::uint32_t>(step * 1000003 + index); }

int run(cudyn::FdChannel& channel, int rank, int device, int steps) {
    auto context = cudyn_example::activate_device(device);
    if (!context) return fail("activate", context.error());
    auto comm = rank == 0 ? cudyn::nccl_communicator_as_root({&channel}) : cudyn::nccl_communicator_from_root(channel);
    if (!comm) return unsupported_or_fail("NCCL communicator", comm.error());
    if (rank == 0) std::printf("NCCL %d from %s\n", cudyn::nccl_report().version, cudyn::nccl_report().library_path.c_str());
    auto buffer = cudyn::create_nccl_growable_buffer(device, kCapacity);
    if (!buffer) return unsupported_or_fail("NCCL-ready GrowableBuffer", buffer.error());
    const std::size_t chunk = buffer->chunk_size_bytes();
    auto weights = cudyn::NcclRegisteredGrowableBuffer::create(*comm, std::move(*buffer));
    if (!weights) return unsupported_or_fail("register", weights.error());
    for (int step = 0; step < steps; ++step) {
        std::uint64_t bytes = (static_cast<std::uint64_t>(step) + 1) * chunk;
        if (rank == 0) {  // the trainer decides the size, and says so first
            if (auto sent = channel.send(kSizeTag, &bytes, sizeof bytes); !sent) return fail("send size", sent.error());
        } else {
            auto message = channel.receive(kSizeTag);
            if (!message) return fail("receive size", message.error());
            std::memcpy(&bytes, message->payload.data(), sizeof bytes);
        }
        if (auto grown = weights->grow_to(bytes); !grown) return fail("grow_to", grown.error());
        auto words = weights->buffer().device_span_as<std::uint32_t>();
        if (!words) return fail("span", words.error());
        std::vector<std::uint32_t> host(words->size());
        if (rank == 0) {
            for (std::size_t i = 0; i < host.size(); ++i) host[i] = weight(step, i);
            if (auto written = words->copy_from(cudyn::HostSpan<const std::uint32_t>(host)); !written)
                return fail("write weights", written.error());
        }
        if (auto sent = comm->broadcast(*words, 0); !sent) return fail("broadcast", sent.error());
        if (rank == 1) {
            if (auto read = words->copy_to(cudyn::HostSpan<std::uint32_t>(host)); !read)
                return fail("read weights", read.error());
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < host.size(); ++i) wrong += host[i] != weight(step, i) ? 1 : 0;
            std::printf("step %d: %zu MiB in %zu registered chunk(s), %zu wrong value(s)\n", step,
                        static_cast<std::size_t>(bytes >> 20), weights->registered_chunks(), wrong);
            if (wrong != 0) return 1;
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int steps = 4;
    int receiver_device = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--receiver-device") == 0) receiver_device = std::atoi(argv[i + 1]);
    }
    // The channel and the fork come before any driver call: a process that
    // used the driver must not fork.
    auto ends = cudyn::FdChannel::pair();
    if (!ends) return fail("FdChannel::pair", ends.error());
    const pid_t child = ::fork();
    if (child < 0) {
        std::perror("nccl_weight_broadcast: fork");
        return 1;
    }
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a rank left alone would wait in NCCL for ever
        const int status = run(ends->second, 1, receiver_device, steps);
        std::fflush(nullptr);  // _Exit flushes nothing
        std::_Exit(status);
    }
    const int trainer = run(ends->first, 0, 0, steps);
    int status = 0;
    ::waitpid(child, &status, 0);
    const int receiver = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    std::printf("trainer exit %d, receiver exit %d\n", trainer, receiver);
    return trainer != 0 ? trainer : receiver;
}
