// ipc_consumer — reads the GPU memory an ipc_producer shares, after waiting
// (on the GPU) for the producer's interprocess event. See ipc_producer.cpp.
//
//   ./build/examples/ipc_consumer cudyn-ipc [--device N]
//
// --device picks this process's GPU: another one than the producer's maps the
// memory over the peer path (NVLink / PCIe).
#include "ipc_example.hpp"

#include <cudyn/cudyn.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace cudyn_example;

namespace {

// Whatever the producer sent, opened or imported and mapped here.
struct ReceivedMemory {
    std::optional<cudyn::ImportedIpcMemory> opened;  // legacy handle
    std::optional<cudyn::AddressRange> range;
    std::optional<cudyn::PhysicalMemory> physical;
    std::optional<cudyn::MappedRange> mapping;  // POSIX descriptor
    cudyn::DeviceSpan<std::uint32_t> words;  // what was shared, as the producer's 32-bit words
};

cudyn::Result<ReceivedMemory> receive_memory(cudyn::FdChannel& channel, int device) {
    auto message = channel.receive(kWaitForPeer);
    if (!message) return message.error();
    ReceivedMemory memory;
    if (message->tag == kMemoryTag) {
        auto descriptor = cudyn::IpcMemoryDescriptor::from_bytes(message->payload.data(), message->payload.size());
        if (!descriptor) return descriptor.error();
        auto opened = cudyn::import_ipc_memory(*descriptor);
        if (!opened) return opened.error();
        auto words = opened->device_span_as<std::uint32_t>();
        if (!words) return words.error();
        memory.words = *words;
        memory.opened = std::move(*opened);
        std::printf("consumer: opened a legacy IPC handle of %zu bytes\n", memory.words.size_bytes());
        return memory;
    }
    if (message->tag != cudyn::kMemoryFdMessageTag)
        return cudyn::Error::invalid_argument("unexpected message tag " + std::to_string(message->tag));
    auto info = cudyn::PhysicalMemoryInfo::from_bytes(message->payload.data(), message->payload.size());
    if (!info) return info.error();
    // The descriptor is closed by the import, whatever it answers.
    auto physical = cudyn::import_memory_fd(cudyn::MemoryFdDescriptor{std::move(message->fd), *info});
    if (!physical) return physical.error();
    auto range = cudyn::AddressRange::reserve(physical->size_bytes());
    if (!range) return range.error();
    auto mapping = cudyn::MappedRange::map(*range, 0, *physical,
                                           {{cudyn::Location::device(device), cudyn::AccessFlags::ReadWrite}});
    if (!mapping) return mapping.error();
    auto words = mapping->device_span_as<std::uint32_t>();
    if (!words) return words.error();
    memory.words = *words;
    memory.range = std::move(*range);
    memory.physical = std::move(*physical);
    memory.mapping = std::move(*mapping);
    std::printf("consumer: imported a POSIX descriptor of %zu bytes\n", memory.words.size_bytes());
    return memory;
}

int run(const std::string& socket, int device_ordinal) {
    auto device = cudyn::Device::get(device_ordinal);
    if (!device) return fail("device", device.error());
    auto context = cudyn::PrimaryContext::activate(*device);
    if (!context) return fail("context", context.error());
    auto location = socket_location(socket);
    if (!location) return fail("socket", location.error());
    auto channel = cudyn::FdChannel::connect(*location, kWaitForPeer);
    if (!channel) return fail("connect", channel.error());

    auto event_message = channel->receive(kEventTag, kWaitForPeer);
    if (!event_message) return fail("receive the event", event_message.error());
    auto event_descriptor =
        cudyn::IpcEventDescriptor::from_bytes(event_message->payload.data(), event_message->payload.size());
    if (!event_descriptor) return fail("event descriptor", event_descriptor.error());
    auto event = cudyn::import_ipc_event(*event_descriptor);
    if (!event) return fail("open the event", event.error());
    auto memory = receive_memory(*channel, device_ordinal);
    if (!memory) return fail("receive the memory", memory.error());
    auto stream = cudyn::Stream::create();
    if (!stream) return fail("stream", stream.error());
    if (auto sent = channel->send(kReadyTag, nullptr, 0); !sent) return fail("send 'ready'", sent.error());

    auto recorded = channel->receive(kRecordedTag, kWaitForPeer);
    if (!recorded) return fail("wait for the producer", recorded.error());
    std::uint32_t expected = 0;
    if (recorded->payload.size() != sizeof expected)
        return fail("'recorded'", cudyn::Error::invalid_argument("payload is not one 32-bit value"));
    std::memcpy(&expected, recorded->payload.data(), sizeof expected);

    // This stream waits for the producer's work on the GPU; the copy comes after it.
    if (auto waited = event->wait(*stream); !waited) return fail("wait on the event", waited.error());
    std::vector<std::uint32_t> words(memory->words.size());
    if (auto copied = memory->words.copy_to(words, *stream); !copied) return fail("copy", copied.error());
    if (auto synced = stream->synchronize(); !synced) return fail("synchronize", synced.error());
    std::size_t wrong = 0;
    for (std::uint32_t word : words) wrong += word != expected ? 1 : 0;

    char answer[128];
    std::snprintf(answer, sizeof answer, "%zu words read, %zu differ from 0x%08x", words.size(), wrong,
                  static_cast<unsigned>(expected));
    std::printf("consumer: %s\n", answer);
    // Close before saying done: the producer frees the memory after our answer.
    memory->mapping.reset();
    if (memory->opened) (void)memory->opened->close();
    if (auto sent = channel->send(kDoneTag, answer, std::strlen(answer)); !sent) return fail("send 'done'", sent.error());
    return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    std::string socket;
    int device = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--device" && i + 1 < argc) {
            device = std::atoi(argv[++i]);
        } else if (socket.empty() && arg[0] != '-') {
            socket = arg;
        } else {
            socket.clear();
            break;
        }
    }
    if (socket.empty()) {
        std::fprintf(stderr, "usage: %s SOCKET_NAME_OR_PATH [--device N]\n", argv[0]);
        return 2;
    }
    return run(socket, device);
}
