// A program built against the headers of the last release and run against
// this libcudyn (scripts/check_consumers.sh): the inline code of a released
// header calls library functions by name, some in cudyn::detail, which the
// ABI check lets go of. This program drives the inline paths most likely to
// call them (stream-ordered buffers freed explicitly and by destructors, on
// a created and on the default stream; device buffers; the ledger's counts;
// an IPC export of a buffer) and checks that what they count adds up. Uses
// only API the release has.
#include "cudyn/cudyn.hpp"

#include <cstdio>
#include <utility>

namespace {

int failures = 0;

void expect(bool condition, const char* what) {
    if (condition) return;
    std::printf("FAILED: %s\n", what);
    ++failures;
}

}  // namespace

int main() {
    using namespace cudyn;
    auto device = Device::get(0);
    expect(device.has_value(), "device 0");
    if (!device) return 1;
    auto context = PrimaryContext::activate(*device);
    auto pool = MemoryPool::create(PoolProperties::device(0));
    auto stream = Stream::create();
    expect(context && pool && stream, "a context, a pool and a stream");
    if (!context || !pool || !stream) return 1;
    const LedgerEntry before = ledger::snapshot().of(MemoryKind::StreamOrdered, 0);

    for (int i = 0; i < 100; ++i) {
        auto buffer = StreamOrderedBuffer<int>::allocate(*pool, 1000, *stream);
        expect(buffer.has_value(), "a stream-ordered allocation from the pool");
        if (!buffer) break;
        if (i % 2 == 0) expect(buffer->free().has_value(), "an explicit free");  // else its destructor frees it
    }
    {
        auto on_default = StreamOrderedBuffer<int>::allocate(1000, Stream::legacy_default());
        expect(on_default.has_value(), "an allocation on the default stream");
        auto moved = std::move(*on_default);
        expect(moved.size() == 1000, "a moved buffer keeps its memory");
    }
    expect(stream->synchronize().has_value(), "the stream's wait");
    const LedgerEntry after = ledger::snapshot().of(MemoryKind::StreamOrdered, 0);
    expect(after.live_bytes == before.live_bytes && after.live_count == before.live_count,
           "every stream-ordered allocation counted out");
    expect(after.total_allocations == before.total_allocations + 101, "every stream-ordered allocation counted in");

    {
        auto buffer = DeviceBuffer<int>::allocate(1024);
        expect(buffer.has_value(), "a device buffer");
        if (buffer) {
            expect(buffer->fill(7).has_value(), "a fill");
            auto descriptor = export_ipc_memory(*buffer);
            expect(descriptor.has_value(), "an IPC export of the buffer");
        }
    }
    expect(ledger::snapshot().of(MemoryKind::Device, 0).live_count == 0, "the device buffer counted out");
    std::printf("%s\n", failures == 0 ? "released headers: all checks passed" : "released headers: FAILED");
    return failures == 0 ? 0 : 1;
}
