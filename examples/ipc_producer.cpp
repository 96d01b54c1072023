// ipc_producer — shares GPU memory with another process and tells it, through
// an interprocess event, when its work is done. Run with ipc_consumer:
//
//   shell 1:  ./build/examples/ipc_producer cudyn-ipc          # legacy IPC handle
//             ./build/examples/ipc_producer cudyn-ipc --fd     # VMM memory, POSIX descriptor
//   shell 2:  ./build/examples/ipc_consumer cudyn-ipc
//
// Options: --device N (default 0), --words N (default 4 Mi 32-bit words).
// A bare name is a socket in this user's private directory
// (cudyn::private_socket_path); a path or '@name' is used as given. Either
// way both programs admit only a peer running as the same user.
// The producer listens on the named Unix socket, sends the consumer an event
// and the memory (an IpcMemoryDescriptor, or the descriptor of a PhysicalMemory
// over SCM_RIGHTS), fills the memory on a stream, records the event and says
// so. The consumer's stream waits for that record on the GPU, so it reads the
// finished bytes without polling. Every wait on the socket is bounded.
#include "ipc_example.hpp"

#include <cudyn/cudyn.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

using namespace cudyn_example;

namespace {

struct Options {
    std::string socket;
    bool posix_fd = false;
    int device = 0;
    std::size_t words = std::size_t{4} << 20;
};

bool parse(int argc, char** argv, Options& options) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--fd") {
            options.posix_fd = true;
        } else if ((arg == "--device" || arg == "--words") && i + 1 < argc) {
            const long long value = std::atoll(argv[++i]);
            if (value < 0 || (arg == "--words" && value == 0)) return false;
            if (arg == "--device") options.device = static_cast<int>(value);
            else options.words = static_cast<std::size_t>(value);
        } else if (options.socket.empty() && arg[0] != '-') {
            options.socket = arg;
        } else {
            return false;
        }
    }
    return !options.socket.empty();
}

// The memory the producer shares: one of the two kinds, and where it is.
struct SharedMemory {
    std::optional<cudyn::DeviceBuffer<std::uint32_t>> buffer;  // legacy handle
    std::optional<cudyn::AddressRange> range;                  // VMM with a POSIX descriptor
    std::optional<cudyn::PhysicalMemory> physical;
    std::optional<cudyn::MappedRange> mapping;
    cudyn::DeviceSpan<std::uint32_t> words;  // all of it (VMM sizes are rounded up to the granularity)
};

cudyn::Result<SharedMemory> allocate(const Options& options) {
    SharedMemory shared;
    if (!options.posix_fd) {
        auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(options.words);
        if (!buffer) return buffer.error();
        shared.words = buffer->device_span();
        shared.buffer = std::move(*buffer);
        return shared;
    }
    const auto props = cudyn::AllocationProperties::device(options.device)
                           .with_handle_types(cudyn::HandleType::PosixFileDescriptor);
    auto granularity = cudyn::allocation_granularity(props);
    if (!granularity) return granularity.error();
    const std::size_t size = (options.words * 4 + *granularity - 1) / *granularity * *granularity;
    auto range = cudyn::AddressRange::reserve(size);
    if (!range) return range.error();
    auto physical = cudyn::PhysicalMemory::create(props, size);
    if (!physical) return physical.error();
    auto mapping = cudyn::MappedRange::map(*range, 0, *physical,
                                           {{cudyn::Location::device(options.device), cudyn::AccessFlags::ReadWrite}});
    if (!mapping) return mapping.error();
    auto words = mapping->device_span_as<std::uint32_t>();
    if (!words) return words.error();
    shared.words = *words;
    shared.range = std::move(*range);
    shared.physical = std::move(*physical);
    shared.mapping = std::move(*mapping);
    return shared;
}

int run(const Options& options) {
    auto device = cudyn::Device::get(options.device);
    if (!device) return fail("device", device.error());
    auto context = cudyn::PrimaryContext::activate(*device);
    if (!context) return fail("context", context.error());

    auto shared = allocate(options);
    if (!shared) return fail("allocate", shared.error());
    auto stream = cudyn::Stream::create();
    auto event = cudyn::IpcEvent::create();
    if (!stream) return fail("stream", stream.error());
    if (!event) return fail("event", event.error());
    auto event_descriptor = cudyn::export_ipc_event(*event);
    if (!event_descriptor) return fail("event handle", event_descriptor.error());

    auto location = socket_location(options.socket);
    if (!location) return fail("socket", location.error());
    auto listener = cudyn::FdListener::listen(*location);
    if (!listener) return fail("listen", listener.error());
    std::printf("producer: %zu words on device %d shared as %s; waiting for a consumer on %s\n", shared->words.size(),
                options.device, options.posix_fd ? "a POSIX descriptor" : "a legacy IPC handle", location->c_str());
    auto channel = listener->accept(kWaitForPeer);
    if (!channel) return fail("accept", channel.error());

    const auto event_bytes = event_descriptor->to_bytes();
    if (auto sent = channel->send(kEventTag, event_bytes.data(), event_bytes.size()); !sent)
        return fail("send the event", sent.error());
    if (options.posix_fd) {
        auto exported = cudyn::export_memory_fd(*shared->physical);
        if (!exported) return fail("export", exported.error());
        if (auto sent = cudyn::send_descriptor(*channel, *exported); !sent) return fail("send the descriptor", sent.error());
    } else {
        auto descriptor = cudyn::export_ipc_memory(*shared->buffer);
        if (!descriptor) return fail("export", descriptor.error());
        const auto bytes = descriptor->to_bytes();
        if (auto sent = channel->send(kMemoryTag, bytes.data(), bytes.size()); !sent)
            return fail("send the handle", sent.error());
    }
    if (auto ready = channel->receive(kReadyTag); !ready) return fail("wait for the consumer", ready.error());

    // The work, then the record, then the word: all without waiting here.
    const std::uint32_t value = kExampleValue;
    if (auto set = shared->words.fill(value, *stream); !set) return fail("fill", set.error());
    if (auto recorded = event->record(*stream); !recorded) return fail("record", recorded.error());
    if (auto sent = channel->send(kRecordedTag, &value, sizeof value); !sent) return fail("send 'recorded'", sent.error());

    auto done = channel->receive(kDoneTag);
    if (!done) return fail("wait for the consumer's answer", done.error());
    std::printf("producer: the consumer says: %.*s\n", static_cast<int>(done->payload.size()),
                reinterpret_cast<const char*>(done->payload.data()));
    // The consumer has closed its mapping: the memory may go now.
    if (auto synced = stream->synchronize(); !synced) return fail("synchronize", synced.error());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (!parse(argc, argv, options)) {
        std::fprintf(stderr, "usage: %s SOCKET_NAME_OR_PATH [--fd] [--device N] [--words N]\n", argv[0]);
        return 2;
    }
    return run(options);
}
