// cudyn-bench — stream memory operations against the raw calls: enqueueing
// a 32-bit and a 64-bit value write, and a value wait already met, on one
// non-blocking stream. Both sides enqueue the same work and synchronize the
// stream at the end of each timed loop, so the device's share is the same.
#include "harness.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/device_capabilities.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/device/stream_memory_ops.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/device_buffer.hpp"

#include <optional>
#include <string>
#include <utility>

namespace cudyn::bench {

namespace {

struct Fixture {
    PrimaryContext context;
    Stream stream;
    DeviceBuffer<std::uint64_t> word;
    DeviceCapabilities caps;
};

Result<Fixture> make_fixture() {
    CUDYN_TRY_ASSIGN(auto device, Device::get(0));
    CUDYN_TRY_ASSIGN(auto context, PrimaryContext::activate(device));
    CUDYN_TRY_ASSIGN(auto stream, Stream::create());
    CUDYN_TRY_ASSIGN(auto word, DeviceBuffer<std::uint64_t>::allocate(1));
    CUDYN_TRY(word.set_bytes(0));
    CUDYN_TRY_ASSIGN(auto caps, probe_capabilities(device));
    return Fixture{std::move(context), std::move(stream), std::move(word), caps};
}

const Fixture* fixture(std::string& error) {
    static std::optional<Result<Fixture>> made;
    if (!made) made.emplace(make_fixture());
    if (!made->has_value()) {
        error = made->error().describe();
        return nullptr;
    }
    return &made->value();
}

enum class Op { Write32, Write64, Wait32 };

CaseResult stream_op(const Settings& settings, Op op) {
    std::string error;
    const Fixture* f = fixture(error);
    if (f == nullptr) return skipped(error);
    if (!has_entry(&DriverTable::cuStreamWriteValue32_v11070))
        return skipped("the driver lacks the 11.7 stream memory operations");
    if (op == Op::Write64 && !f->caps.stream_memory_ops_64_bit)
        return skipped("device 0 reports CAN_USE_64_BIT_STREAM_MEM_OPS = 0");
    const DriverTable& cu = driver();
    const CUstream stream = f->stream.handle();
    const CUdeviceptr address = f->word.device_address();
    // Waits compare with 0, which the word (0, then written 0) always meets.
    const auto raw_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            CUresult rc = CUDA_SUCCESS;
            switch (op) {
                case Op::Write32: rc = cu.cuStreamWriteValue32_v11070(stream, address, 0, 0); break;
                case Op::Write64: rc = cu.cuStreamWriteValue64_v11070(stream, address, 0, 0); break;
                case Op::Wait32:
                    rc = cu.cuStreamWaitValue32_v11070(stream, address, 0, CU_STREAM_WAIT_VALUE_GEQ);
                    break;
            }
            wrong += rc == CUDA_SUCCESS ? 0 : 1;
        }
        wrong += cu.cuStreamSynchronize_v2000(stream) == CUDA_SUCCESS ? 0 : 1;
        return wrong;
    };
    const auto cudyn_loop = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            Result<void> done = ok();
            switch (op) {
                case Op::Write32: done = write_value32(address, 0, f->stream); break;
                case Op::Write64: done = write_value64(address, 0, f->stream); break;
                case Op::Wait32: done = wait_value32(address, 0, WaitCondition::GreaterOrEqual, f->stream); break;
            }
            wrong += done.has_value() ? 0 : 1;
        }
        wrong += f->stream.synchronize().has_value() ? 0 : 1;
        return wrong;
    };
    CaseResult result = compare_loops(settings, 20000, raw_loop, cudyn_loop);
    if (result.status != Status::Ok) return result;
    switch (op) {
        case Op::Write32: result.operation = "write_value32 vs cuStreamWriteValue32_v2 (+ one sync per loop)"; break;
        case Op::Write64: result.operation = "write_value64 vs cuStreamWriteValue64_v2 (+ one sync per loop)"; break;
        case Op::Wait32: result.operation = "wait_value32 (met) vs cuStreamWaitValue32_v2 (+ one sync per loop)"; break;
    }
    result.unit = "ns/call";
    return result;
}

CaseResult write32(const Settings& settings) { return stream_op(settings, Op::Write32); }
CaseResult write64(const Settings& settings) { return stream_op(settings, Op::Write64); }
CaseResult wait32(const Settings& settings) { return stream_op(settings, Op::Wait32); }

const CaseRegistrar write32_case({"stream-ops/write-value32",
                                  "write_value32 vs raw cuStreamWriteValue32_v2 on one stream, per call", true,
                                  write32});
const CaseRegistrar write64_case({"stream-ops/write-value64",
                                  "write_value64 (the cached 64-bit gate) vs raw cuStreamWriteValue64_v2, per call",
                                  true, write64});
const CaseRegistrar wait32_case({"stream-ops/wait-value32",
                                 "wait_value32 on a met condition vs raw cuStreamWaitValue32_v2, per call", true,
                                 wait32});

}  // namespace

}  // namespace cudyn::bench
