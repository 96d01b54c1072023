// The part one rank plays in the NCCL scenarios, the same in both processes
// of a two-rank communicator (fake suite and gpu suite): all-reduce over a
// registered DeviceBuffer, over pool memory, and over a registered
// GrowableBuffer that grows between collectives; then a weight broadcast
// after the trainer (rank 0) grew the buffer to three chunks. Every value is
// checked. Rank r runs on device r. Plain checks (no Catch2): a child
// process runs it too.
#pragma once

#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/nccl/communicator.hpp"
#include "cudyn/nccl/nccl_channel.hpp"
#include "cudyn/nccl/nccl_memory.hpp"
#include "cudyn/nccl/registered_growable_buffer.hpp"
#include "cudyn/nccl/registered_memory.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include "ipc_helpers.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace cudyn_test {

// The number of failed checks, each printed to stderr.
inline int nccl_rank_scenario(cudyn::NcclCommunicator& comm) {
    int failures = 0;
    const auto expect = [&failures, &comm](bool condition, const char* what) {
        if (!condition) {
            std::fprintf(stderr, "rank %d: %s\n", comm.rank(), what);
            ++failures;
        }
    };
    const auto good = [&expect](const auto& result, const char* what) {
        if (!result) std::fprintf(stderr, "%s: %s\n", what, result.error().describe().c_str());
        expect(result.has_value(), what);
        return result.has_value();
    };
    const int rank = comm.rank();
    // A registered DeviceBuffer: all-reduce in place.
    {
        auto buffer = cudyn::DeviceBuffer<float>::allocate(1024);
        if (!good(buffer, "allocate")) return failures + 1;
        const std::vector<float> mine(1024, static_cast<float>(rank + 1));
        good(buffer->copy_from(cudyn::HostSpan<const float>(mine)), "fill");
        auto registered = cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<float>>::create(comm, std::move(*buffer));
        if (!good(registered, "register")) return failures + 1;
        const cudyn::DeviceSpan<float> span = registered->memory().device_span();
        good(comm.all_reduce<float>(span, span, cudyn::NcclReduction::Sum), "all_reduce");
        std::vector<float> sums(1024);
        good(span.copy_to(cudyn::HostSpan<float>(sums)), "read");
        expect(sums.front() == 3.0f && sums.back() == 3.0f, "the all-reduce summed both ranks");
    }
    // Pool memory (stream-ordered), on a stream of its own: all-reduced as it is.
    {
        auto stream = cudyn::Stream::create();
        if (!good(stream, "stream")) return failures + 1;
        auto pooled = cudyn::StreamOrderedBuffer<double>::allocate(4096, *stream);
        if (!good(pooled, "pool allocation")) return failures + 1;
        const std::vector<double> mine(4096, rank == 0 ? 0.25 : 0.5);
        good(pooled->copy_from(cudyn::HostSpan<const double>(mine)), "fill pool memory");
        good(comm.all_reduce<double>(pooled->device_span(), pooled->device_span(), cudyn::NcclReduction::Max, *stream),
             "all_reduce pool memory");
        good(stream->synchronize(), "synchronize");
        std::vector<double> maxima(4096);
        good(pooled->copy_to(cudyn::HostSpan<double>(maxima)), "read pool memory");
        expect(maxima.front() == 0.5 && maxima.back() == 0.5, "the pool memory's maximum");
        good(pooled->free(), "free pool memory");
    }
    // A registered GrowableBuffer that grows between collectives.
    auto buffer = cudyn::create_nccl_growable_buffer(rank, std::size_t{16} << 20);
    if (!good(buffer, "growable")) return failures + 1;
    const std::size_t chunk = buffer->chunk_size_bytes();
    good(buffer->grow_to(chunk), "grow to one chunk");
    auto registered = cudyn::NcclRegisteredGrowableBuffer::create(comm, std::move(*buffer));
    if (!good(registered, "register the growable buffer")) return failures + 1;
    const auto fill_and_reduce = [&](std::size_t bytes, std::int32_t value) {
        good(registered->grow_to(bytes), "grow");
        auto words = registered->buffer().device_span_as<std::int32_t>();
        if (!good(words, "span")) return std::vector<std::int32_t>();
        good(words->fill(value), "fill words");
        good(comm.all_reduce<std::int32_t>(*words, *words, cudyn::NcclReduction::Sum), "all_reduce words");
        std::vector<std::int32_t> values(words->size());
        good(words->copy_to(cudyn::HostSpan<std::int32_t>(values)), "read words");
        return values;
    };
    const auto one = fill_and_reduce(chunk, rank + 10);
    expect(one.size() == chunk / 4 && one.back() == 21, "one chunk summed");
    const auto two = fill_and_reduce(2 * chunk, rank + 100);
    expect(two.size() == chunk / 2 && two.front() == 201 && two.back() == 201, "two chunks summed after growing");
    expect(registered->registered_chunks() == 2, "both chunks registered");
    // Weights broadcast: the trainer (rank 0) grows to three chunks and
    // writes; the receiver grows in step and finds them in place.
    good(registered->grow_to(3 * chunk), "grow to three chunks");
    auto weights = registered->buffer().device_span_as<std::uint32_t>();
    if (!good(weights, "weights")) return failures + 1;
    if (rank == 0) {
        std::vector<std::uint32_t> values(weights->size());
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint32_t>(i * 7 + 1);
        good(weights->copy_from(cudyn::HostSpan<const std::uint32_t>(values)), "write weights");
    }
    good(comm.broadcast(*weights, 0), "broadcast");
    std::vector<std::uint32_t> received(weights->size());
    good(weights->copy_to(cudyn::HostSpan<std::uint32_t>(received)), "read weights");
    bool all = true;
    for (std::size_t i = 0; i < received.size(); ++i) all = all && received[i] == static_cast<std::uint32_t>(i * 7 + 1);
    expect(all, "every broadcast weight in place, in all three chunks");
    good(registered->shrink_to(chunk), "shrink");
    expect(registered->registered_chunks() == 1, "one chunk left registered");
    return failures;
}

// Rank 1 of a two-rank communicator, in the child process: the channel to
// the parent, device 1's context, the communicator from rank 0 (waiting at
// most `timeout`), then `scenario(comm)`. The communicator is gone when this
// returns.
struct PeerRankOutcome {
    int setup_failure = 0;  // the exit code when the set-up failed: 10 channel, 11 device, 12 context, 13 communicator
    int failed_checks = 0;  // the scenario's answer
};
template <typename Scenario>
PeerRankOutcome run_peer_rank(std::chrono::milliseconds timeout, Scenario&& scenario) {
    auto channel = ipc::child_channel();
    if (!channel) return {10, 0};
    auto device = cudyn::Device::get(1);
    if (!device) return {11, 0};
    auto context = cudyn::PrimaryContext::activate(*device);
    if (!context) return {12, 0};
    auto comm = cudyn::nccl_communicator_from_root(*channel, timeout);
    if (!comm) {
        std::fprintf(stderr, "rank 1: %s\n", comm.error().describe().c_str());
        return {13, 0};
    }
    return {0, scenario(*comm)};
}

}  // namespace cudyn_test
