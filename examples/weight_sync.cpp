// weight_sync — a trainer process keeps its weights in a growable range and an
// inference process maps the same memory, following every change without a
// copy: the pattern of reinforcement-learning weight sync.
//
//   ./build/examples/weight_sync [--inference-device N] [--steps N]
//
// The program forks before either side touches the driver: the parent is the
// trainer (device 0), the child the inference engine (device N, 0 by
// default). The trainer grows its weights by one layer per step (a
// GrowableBuffer: more physical chunks in one reservation, at one address)
// and rewrites every layer with the step's version; after each step it sends
// a RangeDescriptor update that names only the new chunks. The inference
// side imported the range once and applies each update in place, then
// checks that every layer holds the version the trainer announced.
// Both sides exit 0 when the machine lacks what this needs (VMM memory with
// POSIX handles, or access from the inference device to device 0), saying so.
#include "example_support.hpp"

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/share/range_sharing.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/growable_buffer.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace cudyn_example;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kLayerBytes = 16 * kMiB;
constexpr std::uint32_t kVersionTag = 0x57535631;  // "WSV1": the step's version and layer count
constexpr std::uint32_t kAckTag = 0x57534131;      // "WSA1": the inference side checked them
constexpr std::uint32_t kSkipTag = 0x57535331;     // "WSS1": the trainer cannot share here

struct Version {
    std::uint32_t version = 0;
    std::uint32_t layers = 0;
};

// The word every weight of `layer` holds after step `version`.
std::uint32_t weight_word(std::uint32_t version, std::size_t layer) {
    return 0x10000000u * (version % 15 + 1) + static_cast<std::uint32_t>(layer);
}

int trainer(cudyn::FdChannel channel, int steps) {
    auto context = activate_device(0);
    if (!context) return fail("trainer: device 0", context.error());
    // Reserving address space costs no memory: the capacity is only a ceiling.
    const auto properties =
        cudyn::AllocationProperties::device(0).with_handle_types(cudyn::HandleType::PosixFileDescriptor);
    auto weights = cudyn::GrowableBuffer::create(properties, static_cast<std::size_t>(steps) * kLayerBytes);
    cudyn::Result<cudyn::RangeExporter> exporter = cudyn::Error::invalid_argument("not created");
    if (weights) exporter = cudyn::RangeExporter::create(*weights);
    if (!weights || !exporter) {
        (void)channel.send(kSkipTag, nullptr, 0);
        return unsupported_or_fail("trainer: a shareable GrowableBuffer", weights ? exporter.error() : weights.error());
    }
    auto layout = exporter->describe();
    if (!layout) return fail("trainer: describe", layout.error());
    if (auto sent = cudyn::send_descriptor(channel, *layout); !sent) return fail("trainer: send the layout", sent.error());

    for (int step = 1; step <= steps; ++step) {
        // One more layer, then every layer rewritten: a training step.
        if (auto grown = weights->grow_to(static_cast<std::size_t>(step) * kLayerBytes); !grown)
            return fail("trainer: grow_to", grown.error());
        const Version version{static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step)};
        auto words = weights->device_span_as<std::uint32_t>();
        if (!words) return fail("trainer: device_span_as", words.error());
        for (std::size_t layer = 0; layer < version.layers; ++layer) {
            auto part = words->subspan(layer * kLayerBytes / 4, kLayerBytes / 4);
            if (!part) return fail("trainer: subspan", part.error());
            if (auto set = part->fill(weight_word(version.version, layer)); !set) return fail("trainer: fill", set.error());
        }
        auto update = exporter->update();
        if (!update) return fail("trainer: update", update.error());
        std::printf("trainer: step %d, %u layer(s), update keeps %llu chunk(s) and sends %zu new\n", step,
                    version.layers, static_cast<unsigned long long>(update->kept_chunks), update->chunks.size());
        if (auto sent = cudyn::send_descriptor(channel, *update); !sent) return fail("trainer: send", sent.error());
        if (auto sent = channel.send(kVersionTag, &version, sizeof version); !sent)
            return fail("trainer: send the version", sent.error());
        auto ack = channel.receive();
        if (!ack) return fail("trainer: wait for the inference side", ack.error());
        if (ack->tag == kSkipTag) return 0;  // the inference side said why
    }
    return 0;
}

int inference(cudyn::FdChannel channel, int device) {
    auto context = activate_device(device);
    if (!context) return unsupported_or_fail("inference: the device", context.error());
    auto layout = cudyn::receive_range(channel);
    if (!layout) {
        if (layout.error().code == cudyn::ErrorCode::InvalidArgument) return 0;  // the trainer skipped, and said why
        return fail("inference: receive the layout", layout.error());
    }
    auto weights = cudyn::import_range(std::move(*layout), {{cudyn::Location::device(device), cudyn::AccessFlags::ReadWrite}});
    if (!weights) {
        (void)channel.send(kSkipTag, nullptr, 0);
        return unsupported_or_fail("inference: import_range", weights.error());
    }
    const CUdeviceptr base = weights->device_address();
    std::printf("inference: device %d mapped the trainer's %zu MiB range at 0x%llx\n", device,
                weights->reserved_bytes() / kMiB, static_cast<unsigned long long>(base));
    for (;;) {
        auto update = cudyn::receive_range(channel);
        if (!update && update.error().code == cudyn::ErrorCode::Io) return 0;  // the trainer is done
        if (!update) return fail("inference: receive an update", update.error());
        if (auto applied = weights->apply(std::move(*update)); !applied) return fail("inference: apply", applied.error());
        auto message = channel.receive(kVersionTag);
        if (!message || message->payload.size() != sizeof(Version))
            return fail("inference: the version", message ? cudyn::Error::invalid_argument("short") : message.error());
        Version version;
        std::memcpy(&version, message->payload.data(), sizeof version);
        if (weights->device_address() != base) {
            std::fprintf(stderr, "inference: the range moved\n");
            return 1;
        }
        std::vector<std::uint32_t> host(weights->size_bytes() / 4);
        auto words = weights->device_span_as<std::uint32_t>();
        if (!words) return fail("inference: device_span_as", words.error());
        if (auto copied = words->copy_to(host); !copied) return fail("inference: copy_to", copied.error());
        if (host.size() != version.layers * kLayerBytes / 4) {
            std::fprintf(stderr, "inference: %zu bytes mapped, expected %u layers\n", host.size() * 4, version.layers);
            return 1;
        }
        for (std::size_t i = 0; i < host.size(); ++i) {
            const std::size_t layer = i * 4 / kLayerBytes;
            if (host[i] != weight_word(version.version, layer)) {
                std::fprintf(stderr, "inference: layer %zu word %zu holds 0x%08X, expected 0x%08X\n", layer, i,
                             static_cast<unsigned>(host[i]), static_cast<unsigned>(weight_word(version.version, layer)));
                return 1;
            }
        }
        std::printf("inference: generation %llu, %u layer(s) of version %u, all weights current\n",
                    static_cast<unsigned long long>(weights->generation()), version.layers, version.version);
        if (auto sent = channel.send(kAckTag, nullptr, 0); !sent) return fail("inference: ack", sent.error());
    }
}

}  // namespace

int main(int argc, char** argv) {
    int device = 0;
    int steps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--inference-device") == 0) device = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    }
    if (steps < 1) steps = 1;
    // The channel and the fork come before any driver call: a process that
    // used the driver must not fork.
    auto ends = cudyn::FdChannel::pair();
    if (!ends) return fail("FdChannel::pair", ends.error());
    const pid_t child = ::fork();
    if (child < 0) {
        std::perror("weight_sync: fork");
        return 1;
    }
    if (child == 0) {
        (void)ends->first.close();
        std::exit(inference(std::move(ends->second), device));
    }
    (void)ends->second.close();
    const int trained = trainer(std::move(ends->first), steps);
    int status = 0;
    if (::waitpid(child, &status, 0) != child) return 1;
    const int inferred = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (trained == 0 && inferred == 0) std::printf("weight_sync: both sides agree on every step\n");
    return trained != 0 ? trained : inferred;
}
