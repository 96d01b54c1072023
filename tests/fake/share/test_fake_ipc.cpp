// Inter-process sharing on the fake drivers, with real second processes: the
// test binary starts itself again in a child role (child_process.hpp), the two
// exchange handles over an FdChannel and see each other's writes.
//
//   [ipc]        legacy memory handles (IpcMemoryDescriptor, ImportedIpcMemory), IPC events
//                and the channel itself: emulated, cuda11, legacy (the CUDA 10.1
//                fake has only the 4.1 cuIpcOpenMemHandle ABI)
//   [shareable]  VMM memory through a POSIX fd and a fabric handle (test_fake_shareable.cpp)
//
// Every wait is bounded: channel operations carry timeouts, children are
// killed and reaped after kChildTimeout, the fake's event waits give up when
// the recording process died. After each case nothing is live in the fake and
// no descriptor is left open.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/core/memory_ledger.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/device/stream_memory_ops.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/share/ipc_event.hpp"
#include "cudyn/share/ipc_memory.hpp"
#include "cudyn/share/imported_ipc_memory.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/stream.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using cudyn::ErrorCode;
using cudyn::FdChannel;
using cudyn::FileDescriptor;
using cudyn::IpcEvent;
using cudyn::IpcEventDescriptor;
using cudyn::IpcMemoryDescriptor;
using cudyn::export_ipc_memory;
using cudyn::ImportedIpcMemory;
using cudyn_test::activate;
using cudyn_test::ChildChecks;
using cudyn_test::ChildProcess;
using cudyn_test::DriverSnapshot;
using cudyn_test::FakeDriver;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::ScopedFault;
using cudyn_test::take;
using namespace cudyn_test::ipc;  // tags, timeouts, probe(), ok(), start_child(), HeldEvents, ...

namespace {

constexpr std::uint32_t kFirst = 0x11111111u;   // before the record
constexpr std::uint32_t kSecond = 0x22222222u;  // the producer's work, done after the record
constexpr std::uint32_t kReply = 0x33333333u;   // the consumer's write back
constexpr std::size_t kWords = 64 * 1024;       // 256 KiB allocation
constexpr std::size_t kOffset = 16 * 1024;      // the shared part starts 16 KiB in
constexpr std::size_t kSharedBytes = 64 * 1024;

// ---- child roles ------------------------------------------------------------------------------

// Imports the producer's memory and event, sees the record pending, waits for
// it on a stream, checks the producer's bytes and writes its reply.
int consumer_role(int, char**) {
    return run_role("ipc-consumer", [](ChildChecks& check, FdChannel& channel) {
        const long live = live_allocations();
        auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
        auto event_descriptor = receive_descriptor<IpcEventDescriptor>(channel, kEventDescriptor);
        if (!ok(check, memory, "memory descriptor") || !ok(check, event_descriptor, "event descriptor")) return;
        check.expect(!memory->exported_by_this_process(), "the descriptor is the parent's");
        auto imported = import_ipc_memory(*memory);
        auto event = import_ipc_event(*event_descriptor);
        if (!ok(check, imported, "import_ipc_memory") || !ok(check, event, "import_ipc_event")) return;
        check.expect(imported->size_bytes() == kSharedBytes &&
                         imported->device_address() == imported->base_address() + kOffset,
                     "the shared part is base + offset");
        check.expect(live_allocations() == live + 2, "the imported memory and event count as live IPC objects");
        check.expect(cudyn::ledger::snapshot().of(cudyn::MemoryKind::IpcOpened).live_bytes == kSharedBytes,
                     "the memory ledger counts the opened memory");
        // The CUDA 10.1 fake has only the 4.1 ABI; newer ones get the _v2 entry.
        auto calls = probe<PFN_fakecuda_call_count>("fakecuda_call_count");
        const bool has_v2 = cudyn::has_entry(&cudyn::DriverTable::cuIpcOpenMemHandle_v11000);
        check.expect(calls != nullptr && calls(has_v2 ? "cuIpcOpenMemHandle_v2" : "cuIpcOpenMemHandle") == 1,
                     "the newest open ABI was used");

        if (!ok(check, channel.receive(kRecorded, kStep), "'recorded'")) return;
        auto complete = event->query();
        check.expect(complete.has_value() && !*complete, "the producer's record is still pending in this process");
        if (!ok(check, send_tag(channel, kWaiting), "send 'waiting'")) return;
        // Blocks until the producer's work completes, in the other process.
        const cudyn::Stream stream = cudyn::Stream::legacy_default();
        ok(check, event->wait(stream), "wait on the stream");
        check.expect(same_words(imported->device_address(), kSharedBytes, kSecond),
                     "the producer's work is visible after the wait");
        auto complete_now = event->query();
        check.expect(complete_now.has_value() && *complete_now, "the record completed");
        // The reply goes through the imported memory's DeviceSpan: its second half.
        auto words = imported->device_span_as<std::uint32_t>();
        if (!ok(check, words, "ImportedIpcMemory::device_span")) return;
        check.expect(words->device_address() == imported->device_address() && words->size() == kSharedBytes / 4,
                     "the span is the shared part");
        auto second_half = words->subspan(words->size() / 2, words->size() / 2);
        if (!ok(check, second_half, "subspan")) return;
        ok(check, second_half->fill(kReply), "write the reply");
        ok(check, send_tag(channel, kDone), "send 'done'");
        ok(check, imported->close(), "close the memory");
        ok(check, event->destroy(), "destroy the event");
    });
}
const cudyn_test::ChildRole consumer("ipc-consumer", consumer_role);

// Imports one handle twice: cudyn refuses the second before the driver, the
// driver itself answers ALREADY_MAPPED; a failed import frees its claim.
int import_twice_role(int, char**) {
    return run_role("ipc-import-twice", [](ChildChecks& check, FdChannel& channel) {
        auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
        if (!ok(check, memory, "memory descriptor")) return;
        auto first = import_ipc_memory(*memory);
        if (!ok(check, first, "first import")) return;
        auto second = import_ipc_memory(*memory);
        check.expect(!second.has_value() && second.error().code == ErrorCode::InvalidArgument &&
                         second.error().message.find("already imported") != std::string::npos,
                     "a second import is refused: " + (second ? std::string("it worked") : describe(second.error())));
        CUdeviceptr raw = 0;
        const CUresult driver = cudyn::has_entry(&cudyn::DriverTable::cuIpcOpenMemHandle_v11000)
                                    ? cudyn::driver().cuIpcOpenMemHandle_v11000(&raw, memory->handle().to_cu(),
                                                                                CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
                                    : cudyn::driver().cuIpcOpenMemHandle_v4010(&raw, memory->handle().to_cu(),
                                                                               CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        check.expect(driver == CUDA_ERROR_ALREADY_MAPPED, "the driver answers ALREADY_MAPPED to a second open");
        ok(check, first->close(), "close");
        auto again = import_ipc_memory(*memory);
        ok(check, again, "import after close");
        ok(check, again->close(), "close again");
        auto set_fail = probe<PFN_fakecuda_set_fail>("fakecuda_set_fail");
        if (!check.expect(set_fail != nullptr, "fakecuda_set_fail")) return;
        set_fail("cuIpcOpenMemHandle");
        auto failed = import_ipc_memory(*memory);
        set_fail("");
        check.expect(!failed.has_value() && failed.error().code == ErrorCode::OutOfMemory,
                     "an injected failure is reported");
        ok(check, import_ipc_memory(*memory), "a failed import leaves no claim behind");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole import_twice("ipc-import-twice", import_twice_role);

// Stream memory operations on IPC-opened memory: a value written by a
// stream of the importer, a wait on it that is met, read back.
int stream_ops_role(int, char**) {
    return run_role("ipc-stream-ops", [](ChildChecks& check, FdChannel& channel) {
        auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
        if (!ok(check, memory, "memory descriptor")) return;
        auto opened = import_ipc_memory(*memory);
        if (!ok(check, opened, "import")) return;
        auto stream = cudyn::Stream::create();
        if (!ok(check, stream, "a stream")) return;
        const CUdeviceptr word = opened->device_address() + 64;
        ok(check, cudyn::write_value32(word, 0xD00Du, *stream), "write_value32 on IPC-opened memory");
        ok(check, cudyn::wait_value32(word, 0xD00Du, cudyn::WaitCondition::Equal, *stream), "wait_value32 on it");
        ok(check, stream->synchronize(), "synchronize");
        std::uint32_t back = 0;
        ok(check, cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, &back, word, sizeof back), "read back");
        check.expect(back == 0xD00Du, "the written value is in the exporter's memory");
        ok(check, opened->close(), "close");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole stream_ops("ipc-stream-ops", stream_ops_role);

// Eight threads import and close one descriptor in the same context, over and
// over: an import either works or is refused by cudyn ("already imported") while
// another thread holds it; the driver never sees a second import of a handle
// that is still mapped (it would answer CUDA_ERROR_ALREADY_MAPPED).
int import_churn_role(int, char**) {
    return run_role("ipc-import-churn", [](ChildChecks& check, FdChannel& channel) {
        auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
        if (!ok(check, memory, "memory descriptor")) return;
        CUcontext context = nullptr;
        if (!ok(check, cudyn::call_driver(&cudyn::DriverTable::cuCtxGetCurrent_v4000, &context), "context")) return;
        std::atomic<long> imported{0};
        std::atomic<long> refused{0};
        std::atomic<long> driver_errors{0};
        std::atomic<long> close_errors{0};
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([&] {
                (void)cudyn::call_driver(&cudyn::DriverTable::cuCtxSetCurrent_v4000, context);
                while (std::chrono::steady_clock::now() < until) {
                    auto one = import_ipc_memory(*memory);
                    if (one) {
                        ++imported;
                        if (!one->close()) ++close_errors;
                    } else if (one.error().code == ErrorCode::InvalidArgument) {
                        ++refused;
                    } else {
                        ++driver_errors;
                    }
                }
            });
        for (std::thread& thread : threads) thread.join();
        check.expect(imported.load() > 0, "some imports worked");
        check.expect(driver_errors.load() == 0,
                     std::to_string(driver_errors.load()) + " imports reached the driver while the handle was mapped");
        check.expect(close_errors.load() == 0, "every close worked");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole import_churn("ipc-import-churn", import_churn_role);

// More handles imported at once than ImportedIpcMemory's record keeps inline (16), so its
// overflow is used too: every handle imports, a second import of one kept inline
// or in the overflow is refused, and a close frees the claim wherever it was.
constexpr int kManyHandles = 20;
int import_many_role(int, char**) {
    return run_role("ipc-import-many", [](ChildChecks& check, FdChannel& channel) {
        std::vector<IpcMemoryDescriptor> memories;
        for (int i = 0; i < kManyHandles; ++i) {
            auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
            if (!ok(check, memory, "memory descriptor")) return;
            memories.push_back(*memory);
        }
        std::vector<ImportedIpcMemory> imported;
        for (const IpcMemoryDescriptor& memory : memories) {
            auto one = import_ipc_memory(memory);
            if (!ok(check, one, "import " + std::to_string(imported.size()))) return;
            imported.push_back(std::move(*one));
        }
        for (const int i : {0, kManyHandles - 1}) {
            auto second = import_ipc_memory(memories[i]);
            check.expect(!second.has_value() && second.error().code == ErrorCode::InvalidArgument,
                         "a second import of handle " + std::to_string(i) + " is refused");
            if (!ok(check, imported[i].close(), "close " + std::to_string(i))) return;
            auto again = import_ipc_memory(memories[i]);
            if (!ok(check, again, "import " + std::to_string(i) + " after its close")) return;
            imported[i] = std::move(*again);
        }
        for (ImportedIpcMemory& one : imported) ok(check, one.close(), "close");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole import_many("ipc-import-many", import_many_role);

// Imports once while the size check cannot be made (cuMemGetAddressRange
// fails): the import fails and leaves nothing imported; then imports for real.
int import_unchecked_role(int, char**) {
    return run_role("ipc-import-unchecked", [](ChildChecks& check, FdChannel& channel) {
        auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
        if (!ok(check, memory, "memory descriptor")) return;
        auto set_fail = probe<PFN_fakecuda_set_fail>("fakecuda_set_fail");
        if (!check.expect(set_fail != nullptr, "fakecuda_set_fail")) return;
        const long live = live_allocations();
        set_fail("cuMemGetAddressRange");
        auto unchecked = import_ipc_memory(*memory);
        set_fail("");
        check.expect(!unchecked.has_value() && unchecked.error().code == ErrorCode::OutOfMemory &&
                         unchecked.error().message.find("could not check") != std::string::npos,
                     "an import whose size cannot be checked fails: " +
                         (unchecked ? std::string("it imported") : describe(unchecked.error())));
        check.expect(live_allocations() == live, "the failed import left nothing imported");
        auto checked = import_ipc_memory(*memory);
        ok(check, checked, "import after the failure");
        if (checked) ok(check, checked->close(), "close");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole import_unchecked("ipc-import-unchecked", import_unchecked_role);

// Tries to import a descriptor whose memory is gone: a clear driver error.
int import_gone_role(int, char**) {
    return run_role("ipc-import-gone", [](ChildChecks& check, FdChannel& channel) {
        auto memory = receive_descriptor<IpcMemoryDescriptor>(channel, kMemDescriptor);
        if (!ok(check, memory, "memory descriptor")) return;
        auto imported = import_ipc_memory(*memory);
        const std::string text = imported ? std::string("it imported") : describe(imported.error());
        check.expect(!imported && imported.error().driver_result == CUDA_ERROR_INVALID_VALUE &&
                         text.find("freed the memory") != std::string::npos,
                     "importing freed memory fails and says why: " + text);
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole import_gone("ipc-import-gone", import_gone_role);

// Exports memory and an event, sends both, and once the parent has imported the
// event exits without cleaning up, leaving a record pending (fakecuda_hold_events).
int export_and_die_role(int, char**) {
    return run_role("ipc-export-and-die", [](ChildChecks& check, FdChannel& channel) {
        auto buffer = cudyn::DeviceBuffer<std::uint32_t>::allocate(1024);
        auto event = IpcEvent::create();
        if (!ok(check, buffer, "allocate") || !ok(check, event, "event")) return;
        auto memory = export_ipc_memory(*buffer);
        auto event_descriptor = export_ipc_event(*event);
        if (!ok(check, memory, "export memory") || !ok(check, event_descriptor, "export event")) return;
        hold_events(true);
        ok(check, event->record(cudyn::Stream::legacy_default()), "record");
        ok(check, send_bytes(channel, kMemDescriptor, memory->to_bytes()), "send memory");
        ok(check, send_bytes(channel, kEventDescriptor, event_descriptor->to_bytes()), "send event");
        ok(check, channel.receive(kDone, kStep), "the parent's go-ahead");  // it has imported the event
        std::fflush(nullptr);
        ::_exit(check.exit_status());  // dies holding the record: no destructor, no goodbye
    });
}
const cudyn_test::ChildRole export_and_die("ipc-export-and-die", export_and_die_role);

// Sends the first bytes of a frame and dies.
int die_mid_message_role(int, char**) {
    const std::uint8_t partial[10] = {'C', 'U', 'D', 'Y', 'N', 'M', 'S', 'G', 1, 0};
    (void)!::write(cudyn_test::kChildChannelFd, partial, sizeof partial);
    ::_exit(0);
}
const cudyn_test::ChildRole die_mid_message("die-mid-message", die_mid_message_role);

// Says nothing; leaves when the parent closes the channel (or after 30 s).
int stay_silent_role(int, char**) {
    auto channel = child_channel();
    if (!channel) return 1;
    auto message = channel->receive(std::chrono::seconds(30));
    return !message && message.error().code == ErrorCode::Io ? 0 : 1;
}
const cudyn_test::ChildRole stay_silent("stay-silent", stay_silent_role);

// Connects to a named socket (argv[0]) and sends a memfd holding a greeting.
int connect_and_send_role(int argc, char** argv) {
    ChildChecks check("connect-and-send");
    if (!check.expect(argc == 1, "one argument: the socket path")) return 1;
    auto channel = FdChannel::connect(argv[0], kStep);
    if (!ok(check, channel, "connect")) return 1;
    FileDescriptor file(::memfd_create("cudyn-test", MFD_CLOEXEC));
    const char greeting[] = "hello from the child";
    check.expect(file.valid() && ::write(file.get(), greeting, sizeof greeting) == static_cast<ssize_t>(sizeof greeting),
                 "memfd with a greeting");
    const std::uint64_t size = sizeof greeting;
    ok(check, channel->send(kRawBytes, &size, sizeof size, file.get(), kStep), "send the descriptor");
    // Wait for the parent to finish reading before leaving.
    auto bye = channel->receive(kDone, kStep);
    ok(check, bye, "'done'");
    return check.exit_status();
}
const cudyn_test::ChildRole connect_and_send("connect-and-send", connect_and_send_role);

// The frame the channel writes, for tests that forge one.
std::array<std::uint8_t, 32> forged_frame(std::uint32_t tag, std::uint32_t flags, std::uint32_t size,
                                          std::uint32_t descriptors = 0) {
    std::array<std::uint8_t, 32> frame{};
    std::memcpy(frame.data(), "CUDYNMSG", 8);
    const std::uint32_t fields[] = {1u | (32u << 16), 0u, tag, flags, size, descriptors};
    std::memcpy(frame.data() + 8, fields, sizeof fields);  // little-endian host
    return frame;
}

}  // namespace

// ---- descriptors, no second process ------------------------------------------------------------------

TEST_CASE("IPC descriptors round-trip; malformed bytes are InvalidArgument before any driver call",
          "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
        auto descriptor = take(export_ipc_memory(buffer.device_address() + kOffset, kSharedBytes));
        CHECK(descriptor.offset_bytes() == kOffset);
        CHECK(descriptor.size_bytes() == kSharedBytes);
        CHECK(descriptor.allocation_size_bytes() == buffer.size_bytes());
        CHECK(descriptor.exporter_pid() == static_cast<std::uint64_t>(::getpid()));
        CHECK(descriptor.exported_by_this_process());
        const auto bytes = descriptor.to_bytes();
        auto back = take(IpcMemoryDescriptor::from_bytes(bytes.data(), bytes.size()));
        CHECK(back.handle() == descriptor.handle());
        CHECK(back.offset_bytes() == kOffset);
        CHECK(back.to_bytes() == bytes);
        auto whole = take(export_ipc_memory(buffer));
        CHECK(whole.handle() == descriptor.handle());  // the handle names the base allocation
        CHECK(whole.offset_bytes() == 0);

        const DriverSnapshot untouched({"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcOpenEventHandle"});
        const auto parse = [](std::vector<std::uint8_t> data) {
            return IpcMemoryDescriptor::from_bytes(data.data(), data.size());
        };
        std::vector<std::uint8_t> good(bytes.begin(), bytes.end());
        std::vector<std::uint8_t> bad = good;
        require_error(parse({good.begin(), good.begin() + 40}), ErrorCode::InvalidArgument, "length");
        require_error(parse({good.begin(), good.begin() + 8}), ErrorCode::InvalidArgument, "shorter than its");
        bad.push_back(0);
        require_error(parse(bad), ErrorCode::InvalidArgument, "length field says 120 bytes, 121 were given");
        bad = good;
        bad[0] = 'X';
        require_error(parse(bad), ErrorCode::InvalidArgument, "wrong magic");
        bad = good;
        bad[8] = 2;
        require_error(parse(bad), ErrorCode::InvalidArgument, "version 2");
        bad = good;
        bad[10] = 119;
        require_error(parse(bad), ErrorCode::InvalidArgument, "length field says 119");
        bad = good;
        bad[16 + 24] = 0xff;  // the offset's low byte: past the allocation
        bad[16 + 25] = 0xff;
        bad[16 + 26] = 0xff;
        require_error(parse(bad), ErrorCode::InvalidArgument, "run past the allocation");
        bad = good;
        std::memset(bad.data() + 56, 0, 64);
        require_error(parse(bad), ErrorCode::InvalidArgument, "all zero");
        require_error(IpcMemoryDescriptor::from_bytes(nullptr, 120), ErrorCode::InvalidArgument, "null data");
        require_error(cudyn::IpcMemoryHandle::from_bytes(good.data(), 63), ErrorCode::InvalidArgument, "63 bytes");
        // Bytes of another record kind are refused by their magic.
        auto event = take(IpcEvent::create());
        const auto event_bytes = take(export_ipc_event(event)).to_bytes();
        require_error(IpcMemoryDescriptor::from_bytes(event_bytes.data(), event_bytes.size()), ErrorCode::InvalidArgument,
                      "wrong magic");
        require_error(IpcEventDescriptor::from_bytes(bytes.data(), bytes.size()), ErrorCode::InvalidArgument,
                      "wrong magic");
        auto event_back = take(IpcEventDescriptor::from_bytes(event_bytes.data(), event_bytes.size()));
        CHECK(event_back.to_bytes() == event_bytes);
        untouched.require_untouched();

        // Bad exports: before the driver, or the driver's refusal with a hint.
        require_error(export_ipc_memory(buffer.device_address(), 0), ErrorCode::InvalidArgument, "non-zero");
        require_error(export_ipc_memory(buffer.device_address() + 4, buffer.size_bytes()), ErrorCode::InvalidArgument,
                      "run past the allocation");
        require_error(export_ipc_memory(cudyn::DeviceBuffer<std::uint32_t>{}),
                      ErrorCode::InvalidArgument, "empty");
        auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(1024));
        require_error(export_ipc_memory(reinterpret_cast<CUdeviceptr>(pinned.data()), 4096),
                      ErrorCode::Driver, "not cuMemAlloc memory");
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("importing a handle in the process that exported it is InvalidArgument, no driver call",
          "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before({"cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcOpenEventHandle"});
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
        auto descriptor = take(export_ipc_memory(buffer));
        require_error(import_ipc_memory(descriptor), ErrorCode::InvalidArgument, "exported by this process");
        auto event = take(IpcEvent::create());
        require_error(import_ipc_event(take(export_ipc_event(event))), ErrorCode::InvalidArgument,
                      "exported by this process");
        // An empty or moved-from event says so.
        IpcEvent moved = std::move(event);
        require_error(event.record(cudyn::Stream::legacy_default()), ErrorCode::InvalidArgument, "empty");
        require_error(export_ipc_event(event), ErrorCode::InvalidArgument, "empty");
        CHECK(take(moved.query()));
    }
    before.require_untouched();
}

TEST_CASE("IPC exports honour injected driver failures and leak nothing", "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
        {
            ScopedFault fault("cuIpcGetMemHandle");
            require_error(export_ipc_memory(buffer), ErrorCode::OutOfMemory, "cuIpcGetMemHandle");
        }
        {
            ScopedFault fault("cuMemGetAddressRange:1:CUDA_ERROR_INVALID_VALUE");
            require_error(export_ipc_memory(buffer.device_address(), 64), ErrorCode::Driver, "cuMemGetAddressRange");
        }
        {
            ScopedFault fault("cuEventCreate");
            require_error(IpcEvent::create(), ErrorCode::OutOfMemory, "cuEventCreate");
        }
        auto event = take(IpcEvent::create());
        {
            ScopedFault fault("cuIpcGetEventHandle:1:CUDA_ERROR_INVALID_HANDLE");
            require_error(export_ipc_event(event), ErrorCode::Driver, "cuIpcGetEventHandle");
        }
        {
            ScopedFault fault("cuEventRecord:1:CUDA_ERROR_INVALID_HANDLE");
            require_error(event.record(cudyn::Stream::legacy_default()), ErrorCode::Driver, "cuEventRecord");
        }
        {
            ScopedFault fault("cuEventQuery:1:CUDA_ERROR_INVALID_HANDLE");
            require_error(event.query(), ErrorCode::Driver, "cuEventQuery");
        }
    }
    CHECK(before.live_delta() == 0);
    CHECK(FakeDriver::loaded().live_events() == 0);
}

TEST_CASE("the fake answers IPC calls as the driver does", "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const cudyn::DriverTable& cu = cudyn::driver();
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
        CUipcMemHandle handle{};
        CHECK(cu.cuIpcGetMemHandle_v4010(nullptr, buffer.device_address()) == CUDA_ERROR_INVALID_VALUE);
        // An address inside the allocation names the whole allocation (an H200 with driver 580 answered so).
        CUipcMemHandle inside{};
        CHECK(cu.cuIpcGetMemHandle_v4010(&inside, buffer.device_address() + 256) == CUDA_SUCCESS);
        REQUIRE(cu.cuIpcGetMemHandle_v4010(&handle, buffer.device_address()) == CUDA_SUCCESS);
        CHECK(std::memcmp(&inside, &handle, sizeof handle) == 0);
        CUdeviceptr opened = 0;
        CHECK(cu.cuIpcOpenMemHandle_v4010(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
              CUDA_ERROR_INVALID_CONTEXT);  // in the exporting process
        CHECK(cu.cuIpcOpenMemHandle_v4010(&opened, handle, 0) == CUDA_ERROR_INVALID_VALUE);
        CUipcMemHandle garbage{};
        std::memset(&garbage, 0x5a, sizeof garbage);
        CHECK(cu.cuIpcOpenMemHandle_v4010(&opened, garbage, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
              CUDA_ERROR_INVALID_VALUE);
        CHECK(cu.cuIpcCloseMemHandle_v4010(buffer.device_address()) == CUDA_ERROR_INVALID_VALUE);  // not opened memory

        CUevent plain = nullptr;
        REQUIRE(cu.cuEventCreate_v2000(&plain, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
        CUipcEventHandle event_handle{};
        CHECK(cu.cuIpcGetEventHandle_v4010(&event_handle, plain) == CUDA_ERROR_INVALID_VALUE);
        CHECK(cu.cuEventDestroy_v4000(plain) == CUDA_SUCCESS);
        CUevent timed = nullptr;
        CHECK(cu.cuEventCreate_v2000(&timed, CU_EVENT_INTERPROCESS) == CUDA_ERROR_INVALID_VALUE);  // needs DISABLE_TIMING
    }
    CHECK(before.live_delta() == 0);
    CHECK(FakeDriver::loaded().live_events() == 0);
}

// ---- two processes ---------------------------------------------------------------------------------------

TEST_CASE("two processes share cuMemAlloc memory; an IPC event orders producer and consumer",
          "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(kWords));
        require_ok(buffer.fill(kFirst));
        auto descriptor = take(export_ipc_memory(buffer.device_address() + kOffset, kSharedBytes));
        auto event = take(IpcEvent::create());
        auto event_descriptor = take(export_ipc_event(event));

        ParentSide side = start_child("ipc-consumer");
        require_ok(send_bytes(side.channel, kMemDescriptor, descriptor.to_bytes()));
        require_ok(send_bytes(side.channel, kEventDescriptor, event_descriptor.to_bytes()));
        {
            // The record stays pending until release(): the consumer must wait for it.
            HeldEvents held;
            require_ok(event.record(cudyn::Stream::legacy_default()));
            require_ok(send_tag(side.channel, kRecorded));
            (void)take(side.channel.receive(kWaiting, kStep));
            CHECK_FALSE(take(event.query()));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the consumer is blocked in its wait now
            // The producer's "GPU work", finished only now, then completed.
            require_ok(set_words(buffer.device_address() + kOffset, kSharedBytes, kSecond));
            held.release();
        }
        CHECK(take(event.query()));
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
        // The consumer's write, seen here; nothing outside the shared part touched.
        CHECK(cudyn_test::all_equal(buffer.device_address() + kOffset, kSharedBytes / 2, kSecond));
        CHECK(cudyn_test::all_equal(buffer.device_address() + kOffset + kSharedBytes / 2, kSharedBytes / 2, kReply));
        CHECK(cudyn_test::all_equal(buffer.device_address(), kOffset, kFirst));
        CHECK(cudyn_test::all_equal(buffer.device_address() + kOffset + kSharedBytes, buffer.size_bytes() - kOffset - kSharedBytes,
                                    kFirst));
    }
    CHECK(before.live_delta() == 0);
    CHECK(FakeDriver::loaded().live_events() == 0);
    CHECK(open_descriptors() == descriptors);
}

namespace {
// A buffer exported to a child `role`, which imports it and reports 'done';
// nothing is left live afterwards.
void share_buffer_with(const char* role, std::chrono::milliseconds step = kStep) {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
        auto descriptor = take(export_ipc_memory(buffer));
        ParentSide side = start_child(role);
        require_ok(send_bytes(side.channel, kMemDescriptor, descriptor.to_bytes()));
        (void)take(side.channel.receive(kDone, step));
        CHECK(side.child.wait(kChildTimeout) == 0);
    }
    CHECK(before.live_delta() == 0);
}
}  // namespace

TEST_CASE("one import per context per handle: a second import is refused clearly", "[emulated][cuda11][legacy][ipc]") {
    share_buffer_with("ipc-import-twice");
}

TEST_CASE("stream memory operations work on IPC-opened memory", "[emulated][cuda11][legacy][ipc]") {
    share_buffer_with("ipc-stream-ops");
}

TEST_CASE("importing and closing one handle from eight threads never reaches the driver twice",
          "[emulated][cuda11][legacy][ipc]") {
    share_buffer_with("ipc-import-churn", std::chrono::seconds(20));
}

TEST_CASE("more handles imported at once than the import record keeps inline: still one import per context each",
          "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        std::vector<cudyn::DeviceBuffer<std::uint32_t>> buffers;
        ParentSide side = start_child("ipc-import-many");
        for (int i = 0; i < kManyHandles; ++i) {
            buffers.push_back(take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024)));
            require_ok(send_bytes(side.channel, kMemDescriptor,
                                  take(export_ipc_memory(buffers.back())).to_bytes()));
        }
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("an import whose size check cannot be made fails and leaves nothing imported", "[emulated][cuda11][legacy][ipc]") {
    share_buffer_with("ipc-import-unchecked");
}

TEST_CASE("a handle of freed memory gives a clear error in the other process", "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    {
        auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(1024));
        auto descriptor = take(export_ipc_memory(buffer));
        require_ok(buffer.free());
        ParentSide side = start_child("ipc-import-gone");
        require_ok(send_bytes(side.channel, kMemDescriptor, descriptor.to_bytes()));
        (void)take(side.channel.receive(kDone, kStep));
        CHECK(side.child.wait(kChildTimeout) == 0);
    }
    CHECK(before.live_delta() == 0);
}

TEST_CASE("an exporter that dies: its handles fail to import, a wait on its pending record ends in an error",
          "[emulated][cuda11][legacy][ipc]") {
    auto context = activate(0);
    const DriverSnapshot before;
    const long descriptors = open_descriptors();
    {
        ParentSide side = start_child("ipc-export-and-die");
        auto memory = take(receive_descriptor<IpcMemoryDescriptor>(side.channel, kMemDescriptor));
        auto event_descriptor = take(receive_descriptor<IpcEventDescriptor>(side.channel, kEventDescriptor));
        // Imported while the exporter lives: the record is pending (held there).
        auto event = take(import_ipc_event(event_descriptor));
        CHECK_FALSE(take(event.query()));
        require_ok(send_tag(side.channel, kDone));  // the exporter may die now
        CHECK(side.child.wait(kChildTimeout) == 0);
        // The exporter is gone: no hang, an error.
        const auto waited = event.synchronize();
        require_error(waited, ErrorCode::Driver, "cuEventSynchronize");
        CHECK(waited.error().driver_result == CUDA_ERROR_LAUNCH_FAILED);
        require_error(event.wait(cudyn::Stream::legacy_default()), ErrorCode::Driver, "cuStreamWaitEvent");
        require_error(import_ipc_memory(memory), ErrorCode::Driver, "exited");
        require_error(import_ipc_event(event_descriptor), ErrorCode::Driver, "exited");
        // The channel says the peer closed.
        require_error(side.channel.receive(std::chrono::milliseconds(500)), ErrorCode::Io, "closed the channel");
        require_ok(event.destroy());
    }
    CHECK(before.live_delta() == 0);
    CHECK(FakeDriver::loaded().live_events() == 0);
    CHECK(open_descriptors() == descriptors);
}

// ---- the channel --------------------------------------------------------------------------------------

TEST_CASE("a peer that dies or stalls mid-exchange gives Io or Timeout, never a hang", "[emulated][ipc]") {
    const long descriptors = open_descriptors();
    {
        ParentSide side = start_child("die-mid-message");
        require_error(side.channel.receive(kStep), ErrorCode::Io, "in the middle of a message");
        CHECK(side.child.wait(kChildTimeout) == 0);
        // Writing to the dead peer: Io, and no SIGPIPE killed this process.
        require_error(side.channel.send(kDone, nullptr, 0), ErrorCode::Io, "closed the channel");
    }
    {
        ParentSide side = start_child("stay-silent");
        const auto started = std::chrono::steady_clock::now();
        require_error(side.channel.receive(std::chrono::milliseconds(200)), ErrorCode::Timeout, "within 200 ms");
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
        require_ok(side.channel.close());  // the child's receive ends with Io: it exits 0
        CHECK(side.child.wait(kChildTimeout) == 0);
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("channel messages carry bytes and a validated descriptor; bad frames are refused", "[emulated][ipc]") {
    const long descriptors = open_descriptors();
    {
        auto ends = take(FdChannel::pair());
        FdChannel& a = ends.first;
        FdChannel& b = ends.second;
        FileDescriptor file(::memfd_create("cudyn-test", MFD_CLOEXEC));
        REQUIRE(file.valid());
        REQUIRE(::ftruncate(file.get(), 12345) == 0);
        const std::string text = "metadata";
        require_ok(a.send(7, text.data(), text.size(), file.get()));
        auto message = take(b.receive());
        CHECK(message.tag == 7);
        CHECK(std::string(message.payload.begin(), message.payload.end()) == text);
        REQUIRE(message.fd.valid());
        CHECK(message.fd.get() != file.get());
        struct stat sent {}, received {};
        REQUIRE(::fstat(file.get(), &sent) == 0);
        REQUIRE(::fstat(message.fd.get(), &received) == 0);
        CHECK(sent.st_ino == received.st_ino);
        CHECK(received.st_size == 12345);
        CHECK((::fcntl(message.fd.get(), F_GETFD) & FD_CLOEXEC) != 0);

        // A message with an empty payload, and one of the largest size.
        require_ok(a.send(8, nullptr, 0));
        CHECK(take(b.receive(8)).payload.empty());
        std::vector<std::uint8_t> big(FdChannel::kMaxPayload, 0xab);
        require_ok(a.send(9, big.data(), big.size()));
        CHECK(take(b.receive(9)).payload == big);

        // Refused before anything is sent.
        big.push_back(0);
        require_error(a.send(9, big.data(), big.size()), ErrorCode::InvalidArgument, "larger than");
        require_error(a.send(9, nullptr, 4), ErrorCode::InvalidArgument, "payload is null");
        require_error(a.send(9, nullptr, 0, 1000), ErrorCode::InvalidArgument, "not an open descriptor");
        // A wrong tag: InvalidArgument, and the descriptor that came with it closed.
        require_ok(a.send(10, nullptr, 0, file.get()));
        require_error(b.receive(11), ErrorCode::InvalidArgument, "expected a message tagged 11, got 10");
        // Nothing to read: Timeout.
        require_error(b.receive(std::chrono::milliseconds(50)), ErrorCode::Timeout, "within 50 ms");

        // Forged frames: not a frame; a frame announcing a descriptor that never came.
        const std::uint8_t zeros[32] = {};
        REQUIRE(::write(a.socket().get(), zeros, sizeof zeros) == 32);
        require_error(b.receive(), ErrorCode::Io, "not a cudyn channel frame");
        const auto announcing = forged_frame(3, 1, 0);
        REQUIRE(::write(a.socket().get(), announcing.data(), announcing.size()) == 32);
        require_error(b.receive(), ErrorCode::Io, "announced a descriptor but none arrived");
        // A list of descriptors (flag 2) that never came, more than a message carries, or both flags.
        const auto listing = forged_frame(3, 2, 0, 2);
        REQUIRE(::write(a.socket().get(), listing.data(), listing.size()) == 32);
        require_error(b.receive(), ErrorCode::Io, "announced 2 descriptors but 0 arrived");
        for (const auto& malformed : {forged_frame(3, 2, 0, 254), forged_frame(3, 3, 0, 1), forged_frame(3, 0, 0, 1)}) {
            REQUIRE(::write(a.socket().get(), malformed.data(), malformed.size()) == 32);
            require_error(b.receive(), ErrorCode::Io, "malformed frame");
        }
        const auto oversized = forged_frame(3, 0, 1u << 30);
        REQUIRE(::write(a.socket().get(), oversized.data(), oversized.size()) == 32);
        require_error(b.receive(), ErrorCode::Io, "malformed frame");

        // Adopting something that is not a Unix stream socket.
        require_error(FdChannel::adopt(std::move(file)), ErrorCode::InvalidArgument, "not a Unix stream socket");
        require_ok(a.close());
        require_error(b.receive(), ErrorCode::Io, "the peer closed the channel");
        require_error(a.send(1, nullptr, 0), ErrorCode::InvalidArgument, "empty or closed");
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("unrelated processes meet at a named socket and pass a descriptor", "[emulated][ipc]") {
    const long descriptors = open_descriptors();
    const std::string pid = std::to_string(::getpid());
    for (const std::string& path : {"/tmp/cudyn-test-" + pid + ".sock", "@cudyn-test-" + pid}) {
        INFO(path);
        {
            auto listener = take(cudyn::FdListener::listen(path));
            ChildProcess child = ChildProcess::spawn("connect-and-send", {path});
            REQUIRE(child.pid() > 0);
            auto channel = take(listener.accept(kStep));
            auto message = take(channel.receive(kRawBytes, kStep));
            std::uint64_t size = 0;
            REQUIRE(message.payload.size() == sizeof size);
            std::memcpy(&size, message.payload.data(), sizeof size);
            REQUIRE(message.fd.valid());
            std::string greeting(size, '\0');
            REQUIRE(::pread(message.fd.get(), greeting.data(), size, 0) == static_cast<ssize_t>(size));
            CHECK(greeting == std::string("hello from the child", size - 1) + '\0');
            require_ok(send_tag(channel, kDone));
            CHECK(child.wait(kChildTimeout) == 0);
        }
        if (path[0] == '/') {
            struct stat info {};
            CHECK(::stat(path.c_str(), &info) != 0);  // the listener removed its socket file
        }
    }
    CHECK(open_descriptors() == descriptors);
}

TEST_CASE("named sockets: bounded connect, stale files replaced, bad paths refused", "[emulated][ipc]") {
    const long descriptors = open_descriptors();
    const std::string path = "/tmp/cudyn-test-stale-" + std::to_string(::getpid()) + ".sock";
    {
        require_error(FdChannel::connect(path, std::chrono::milliseconds(100)), ErrorCode::Timeout,
                      "nobody listened at");
        require_error(cudyn::FdListener::listen("/tmp/" + std::string(200, 'x')), ErrorCode::InvalidArgument,
                      "longer than");
        require_error(cudyn::FdListener::listen(""), ErrorCode::InvalidArgument, "empty");
        {
            auto listener = take(cudyn::FdListener::listen(path));
            require_error(listener.accept(std::chrono::milliseconds(50)), ErrorCode::Timeout, "nobody connected");
            require_error(cudyn::FdListener::listen(path), ErrorCode::Io, "another process listens");
        }
        // A socket file whose listener died without cleaning up.
        {
            FileDescriptor stale(::socket(AF_UNIX, SOCK_STREAM, 0));
            sockaddr_un address{};
            address.sun_family = AF_UNIX;
            std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
            REQUIRE(::bind(stale.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        }
        {
            auto listener = take(cudyn::FdListener::listen(path));
            auto client = take(FdChannel::connect(path, kStep));
            auto server = take(listener.accept(kStep));
            require_ok(client.send(1, "x", 1));
            CHECK(take(server.receive(1)).payload.size() == 1);
        }
        // A regular file is never replaced.
        { FileDescriptor regular(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
        require_error(cudyn::FdListener::listen(path), ErrorCode::Io, "not a socket");
        ::unlink(path.c_str());
    }
    CHECK(open_descriptors() == descriptors);
}
