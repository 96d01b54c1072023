// Copy plans on the fake drivers ([copy-plan]): the fake's cuMemcpyBatchAsync
// as a model of driver 580's (both ABIs on emulated, the 12.8 one on cuda12;
// docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md), then
// CopyPlan on every variant: the path it takes (13.0 batch, 12.8 batch, one
// cuMemcpyAsync per copy), the bytes in every direction, the source orders,
// the checks made before any call, and which copy a failure names. Also the
// cuda12 variant's entry-point chain ([cuda12][chain]).
#include "support/catch.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/stream.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using cudyn::CopyPlan;
using cudyn::DeviceSpan;
using cudyn::DriverTable;
using cudyn::ErrorCode;
using cudyn::HostSpan;
using cudyn::SourceAccessOrder;
using namespace cudyn_test;  // FakeDriver, ScopedFault, ScopedStreamDelay, activate, DriverSnapshot, require_error

namespace {

constexpr std::size_t kWords = 1024;  // 4 KiB per buffer
constexpr std::size_t kUnwritten = 77;

std::string variant() { return FakeDriver::loaded().variant(); }

// What CopyPlan::execute(stream) takes on this variant for a created stream.
CopyPlan::Path expected_path() {
    const std::string name = variant();
    if (name == "emulated") return CopyPlan::Path::Batch13000;
    if (name == "cuda12") return CopyPlan::Path::Batch12080;
    return CopyPlan::Path::PerCopy;
}

cudyn::Stream new_stream() { return take(cudyn::Stream::create()); }

template <typename T>
cudyn::DeviceBuffer<T> device_words(std::size_t n, std::uint32_t first) {
    auto buffer = take(cudyn::DeviceBuffer<T>::allocate(n));
    require_ok(buffer.copy_from(iota_vector(n, first)));
    return buffer;
}

// One ABI of cuMemcpyBatchAsync, called raw: the 13.0 one ignores failIdx.
struct BatchAbi {
    const char* symbol;
    bool reports_index;
    std::function<CUresult(CUdeviceptr*, CUdeviceptr*, std::size_t*, std::size_t, CUmemcpyAttributes*, std::size_t*,
                           std::size_t, std::size_t*, CUstream)>
        call;
};

std::vector<BatchAbi> batch_abis() {
    const DriverTable& cu = cudyn::driver();
    std::vector<BatchAbi> abis;
    if (cu.cuMemcpyBatchAsync_v12080)
        abis.push_back({"cuMemcpyBatchAsync", true, cu.cuMemcpyBatchAsync_v12080});
    if (cu.cuMemcpyBatchAsync_v13000)
        abis.push_back({"cuMemcpyBatchAsync_v2", false,
                        [&cu](CUdeviceptr* d, CUdeviceptr* s, std::size_t* n, std::size_t count, CUmemcpyAttributes* a,
                              std::size_t* i, std::size_t na, std::size_t*, CUstream stream) {
                            return cu.cuMemcpyBatchAsync_v13000(d, s, n, count, a, i, na, stream);
                        }});
    return abis;
}

CUmemcpyAttributes attributes(CUmemcpySrcAccessOrder order) {
    CUmemcpyAttributes a{};
    a.srcAccessOrder = order;
    return a;
}

// Three 4 KiB device-to-device copies, raw: from `sources` to `destinations`.
struct RawBatch {
    cudyn::DeviceBuffer<std::uint32_t> from = device_words<std::uint32_t>(3 * kWords, 1);
    cudyn::DeviceBuffer<std::uint32_t> to = device_words<std::uint32_t>(3 * kWords, 900000);
    std::vector<CUdeviceptr> sources, destinations;
    std::vector<std::size_t> sizes = std::vector<std::size_t>(3, kWords * 4);
    RawBatch() {
        for (std::size_t i = 0; i < 3; ++i) {
            sources.push_back(from.device_address() + i * kWords * 4);
            destinations.push_back(to.device_address() + i * kWords * 4);
        }
    }
    CUresult run(const BatchAbi& abi, CUstream stream, std::size_t* failed, CUmemcpyAttributes a = attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                 std::size_t count = 3) {
        std::size_t first = 0;
        return abi.call(destinations.data(), sources.data(), sizes.data(), count, &a, &first, 1, failed, stream);
    }
    bool copied() const { return read_device(to.device_address(), 3 * kWords) == iota_vector(3 * kWords, 1); }
    bool untouched() const { return read_device(to.device_address(), 3 * kWords) == iota_vector(3 * kWords, 900000); }
};

}  // namespace

// --- the fake's cuMemcpyBatchAsync ----------------------------------------------------------------

TEST_CASE("cuMemcpyBatchAsync refuses what driver 580 refused, at the call, queueing nothing",
          "[emulated][cuda12][copy-plan]") {
    auto context = activate(0);
    const FakeDriver& fake = FakeDriver::loaded();
    auto stream = new_stream();
    const auto abis = batch_abis();
    REQUIRE(abis.size() == (variant() == "emulated" ? 2u : 1u));
    for (const BatchAbi& abi : abis) {
        INFO(abi.symbol);
        RawBatch batch;
        const long pending = fake.pending_work();
        std::size_t failed = kUnwritten;
        // The legacy default stream, both spellings: refused, failIdx unwritten.
        CHECK(batch.run(abi, nullptr, &failed) == CUDA_ERROR_INVALID_VALUE);
        CHECK(batch.run(abi, CU_STREAM_LEGACY, &failed) == CUDA_ERROR_INVALID_VALUE);
        CHECK(failed == kUnwritten);
        // count 0, numAttrs 0, attrIdxs[0] != 0, order INVALID (0) or above ANY (3).
        CHECK(batch.run(abi, stream.handle(), &failed, attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM), 0) ==
              CUDA_ERROR_INVALID_VALUE);
        CUmemcpyAttributes a = attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
        std::size_t first = 0;
        CHECK(abi.call(batch.destinations.data(), batch.sources.data(), batch.sizes.data(), 3, &a, &first, 0, &failed,
                       stream.handle()) == CUDA_ERROR_INVALID_VALUE);
        std::size_t one = 1;
        CHECK(abi.call(batch.destinations.data(), batch.sources.data(), batch.sizes.data(), 3, &a, &one, 1, &failed,
                       stream.handle()) == CUDA_ERROR_INVALID_VALUE);
        CHECK(batch.run(abi, stream.handle(), &failed, attributes(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID)) ==
              CUDA_ERROR_INVALID_VALUE);
        CHECK(batch.run(abi, stream.handle(), &failed, attributes(static_cast<CUmemcpySrcAccessOrder>(4))) ==
              CUDA_ERROR_INVALID_VALUE);
        CHECK(failed == kUnwritten);
        // A copy of size 0, and one running past its allocation: refused, the
        // 12.8 ABI names it.
        batch.sizes[1] = 0;
        CHECK(batch.run(abi, stream.handle(), &failed) == CUDA_ERROR_INVALID_VALUE);
        if (abi.reports_index) CHECK(failed == 1);
        batch.sizes[1] = kWords * 4;
        batch.sizes[2] = kWords * 4 + 4;
        failed = kUnwritten;
        CHECK(batch.run(abi, stream.handle(), &failed) == CUDA_ERROR_INVALID_VALUE);
        CHECK(failed == (abi.reports_index ? 2 : kUnwritten));
        CHECK(fake.pending_work() == pending);  // nothing queued by any refusal
        require_ok(stream.synchronize());
        CHECK(batch.untouched());

        // Accepted: a created stream, the per-thread default stream, every order; success writes SIZE_MAX.
        batch.sizes[2] = kWords * 4;
        for (auto order : {CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
                           CU_MEMCPY_SRC_ACCESS_ORDER_ANY}) {
            failed = kUnwritten;
            CHECK(batch.run(abi, stream.handle(), &failed, attributes(order)) == CUDA_SUCCESS);
            CHECK(failed == (abi.reports_index ? SIZE_MAX : kUnwritten));
        }
        CHECK(batch.run(abi, CU_STREAM_PER_THREAD, &failed) == CUDA_SUCCESS);
        // Two attributes, the second from copy 2 on.
        CUmemcpyAttributes two[] = {attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                    attributes(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
        std::size_t starts[] = {0, 2};
        CHECK(abi.call(batch.destinations.data(), batch.sources.data(), batch.sizes.data(), 3, two, starts, 2, &failed,
                       stream.handle()) == CUDA_SUCCESS);
        require_ok(stream.synchronize());
        require_ok(cudyn::Stream::per_thread_default().synchronize());
        CHECK(batch.copied());
    }
}

TEST_CASE("cuMemcpyBatchAsync's copies run later, in stream order; DURING_API_CALL reads the source at the call",
          "[emulated][cuda12][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    for (const BatchAbi& abi : batch_abis()) {
        INFO(abi.symbol);
        for (auto order : {CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL}) {
            INFO("order " << order);
            RawBatch batch;
            {
                const ScopedStreamDelay slow(20000);
                // Earlier work on the stream rewrites the sources; the batch comes after it.
                require_ok(batch.from.device_span().fill(0x5A5A5A5Au, stream));
                std::size_t failed = 0;
                REQUIRE(batch.run(abi, stream.handle(), &failed, attributes(order)) == CUDA_SUCCESS);
                CHECK(batch.untouched());  // not run yet: the destination is written in stream order
                require_ok(stream.synchronize());
            }
            // STREAM read the sources after the fill; DURING_API_CALL read them at the call, before it.
            if (order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)
                CHECK(read_device(batch.to.device_address(), 3 * kWords) ==
                      std::vector<std::uint32_t>(3 * kWords, 0x5A5A5A5Au));
            else
                CHECK(batch.copied());
        }
    }
}

TEST_CASE("cuGetProcAddress hands out one cuMemcpyBatchAsync per ABI version", "[emulated][cuda12][copy-plan]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto proc_address = reinterpret_cast<PFN_cuGetProcAddress_v12000>(fake.symbol("cuGetProcAddress_v2"));
    REQUIRE(proc_address != nullptr);
    const auto ask = [&](int version, cuuint64_t flags, CUresult* rc) {
        void* function = nullptr;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        *rc = proc_address("cuMemcpyBatchAsync", &function, version, flags, &status);
        return *rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? function : nullptr;
    };
    CUresult rc = CUDA_SUCCESS;
    CHECK(ask(12080, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &rc) == fake.symbol("cuMemcpyBatchAsync"));
    CHECK(ask(12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &rc) == fake.symbol("cuMemcpyBatchAsync_ptsz"));
    CHECK(ask(12070, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &rc) == nullptr);  // VERSION_NOT_SUFFICIENT
    CHECK(rc == CUDA_SUCCESS);
    if (variant() == "emulated") {
        void* v2 = ask(13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &rc);
        CHECK(v2 == fake.symbol("cuMemcpyBatchAsync_v2"));
        CHECK(v2 != fake.symbol("cuMemcpyBatchAsync"));
        CHECK(ask(13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &rc) ==
              fake.symbol("cuMemcpyBatchAsync_v2_ptsz"));
    } else {
        CHECK(ask(13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &rc) == nullptr);
        CHECK(rc == CUDA_ERROR_INVALID_VALUE);  // above the driver's version
        CHECK(fake.symbol("cuMemcpyBatchAsync_v2") == nullptr);
    }
}

// --- the cuda12 variant's chain ---------------------------------------------------------------------

TEST_CASE("cuda12 (12.8): cuGetProcAddress_v2, the 12.8 copy-batch ABI, nothing of CUDA 13", "[cuda12][chain]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    REQUIRE(report.state == cudyn::LoadState::Loaded);
    CHECK(report.driver_version == 12080);
    CHECK(report.has_proc_address_v2);
    const FakeDriver& fake = FakeDriver::loaded();
    CHECK(fake.variant() == "cuda12");
    for (const cudyn::EntryPointReport& entry : report.entry_points) {
        INFO(entry.abi_symbol << " v" << entry.version);
        CHECK(entry.via == (entry.version > 12080 ? cudyn::ResolvedVia::None : cudyn::ResolvedVia::ProcAddressV2));
    }
    CHECK(report.missing_required().empty());
    const DriverTable& table = cudyn::driver();
    CHECK(reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v12080) == fake.symbol("cuMemcpyBatchAsync"));
    CHECK(table.cuMemcpyBatchAsync_v13000 == nullptr);
    CHECK(fake.symbol("cuMemcpyBatchAsync_v2") == nullptr);  // not even for dlsym
}

TEST_CASE("emulated: both copy-batch ABIs resolve, each to its own function", "[emulated][chain]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const DriverTable& table = cudyn::driver();
    CHECK(reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v12080) == fake.symbol("cuMemcpyBatchAsync"));
    CHECK(reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v13000) == fake.symbol("cuMemcpyBatchAsync_v2"));
    CHECK(reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v12080) !=
          reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v13000));
}

TEST_CASE("cuda11 and legacy: no copy-batch entry", "[cuda11][legacy][chain]") {
    CHECK_FALSE(cudyn::has_entry(&DriverTable::cuMemcpyBatchAsync_v12080));
    CHECK_FALSE(cudyn::has_entry(&DriverTable::cuMemcpyBatchAsync_v13000));
    CHECK(FakeDriver::loaded().symbol("cuMemcpyBatchAsync") == nullptr);
}

// --- CopyPlan --------------------------------------------------------------------------------------

namespace {

// Every direction, 4 KiB each, and where each copy's bytes must end up.
struct Directions {
    cudyn::PinnedBuffer<std::uint32_t> pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(kWords));
    std::vector<std::uint32_t> pageable = iota_vector(kWords, 2000);
    cudyn::DeviceBuffer<std::uint32_t> device = device_words<std::uint32_t>(4 * kWords, 0);
    cudyn::DeviceBuffer<std::uint32_t> source = device_words<std::uint32_t>(kWords, 5000);
    std::vector<std::uint32_t> back = std::vector<std::uint32_t>(kWords, 0);
    cudyn::PinnedBuffer<std::uint32_t> pinned_back = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(kWords));
    std::vector<std::uint32_t> host_copy = std::vector<std::uint32_t>(kWords, 0);

    Directions() {
        const auto values = iota_vector(kWords, 1000);
        std::copy(values.begin(), values.end(), pinned.data());
        std::fill(pinned_back.begin(), pinned_back.end(), 0u);
    }
    DeviceSpan<std::uint32_t> quarter(std::size_t i) const { return take(device.device_span().subspan(i * kWords, kWords)); }

    CopyPlan plan(SourceAccessOrder order = SourceAccessOrder::Stream) {
        CopyPlan made(order);
        require_ok(made.add(quarter(0), pinned.span()));                 // pinned host -> device
        require_ok(made.add(quarter(1), pageable));                      // pageable host -> device
        require_ok(made.add(quarter(2), source.device_span()));          // device -> device
        require_ok(made.add(back, source.device_span()));                // device -> pageable host
        require_ok(made.add(pinned_back.span(), source.device_span()));  // device -> pinned host
        require_ok(made.add(HostSpan<std::uint32_t>(host_copy), pageable));  // host -> host
        CHECK(made.size() == 6);
        return made;
    }
    void check_arrived() const {
        CHECK(read_device(device.device_address(), kWords) == iota_vector(kWords, 1000));
        CHECK(read_device(device.device_address() + kWords * 4, kWords) == iota_vector(kWords, 2000));
        CHECK(read_device(device.device_address() + 2 * kWords * 4, kWords) == iota_vector(kWords, 5000));
        CHECK(back == iota_vector(kWords, 5000));
        CHECK(std::vector<std::uint32_t>(pinned_back.begin(), pinned_back.end()) == iota_vector(kWords, 5000));
        CHECK(host_copy == iota_vector(kWords, 2000));
    }
};

// Calls of the three entries a plan may use since construction.
struct PathCalls {
    DriverSnapshot snapshot = DriverSnapshot({"cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2", "cuMemcpyAsync"});
    void check(CopyPlan::Path path, long copies) const {
        CHECK(snapshot.calls_since("cuMemcpyBatchAsync_v2") == (path == CopyPlan::Path::Batch13000 ? 1 : 0));
        CHECK(snapshot.calls_since("cuMemcpyBatchAsync") == (path == CopyPlan::Path::Batch12080 ? 1 : 0));
        CHECK(snapshot.calls_since("cuMemcpyAsync") == (path == CopyPlan::Path::PerCopy ? copies : 0));
    }
};

}  // namespace

TEST_CASE("CopyPlan moves every direction in one batch call where the driver has one",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    for (const cudyn::StreamRef where : {cudyn::StreamRef(stream), cudyn::StreamRef(CU_STREAM_PER_THREAD)}) {
        INFO("stream " << where.handle());
        Directions d;
        const CopyPlan plan = d.plan();
        CHECK(CopyPlan::path_for(where) == expected_path());
        const PathCalls calls;
        const auto path = take(plan.execute(where));
        CHECK(path == expected_path());
        calls.check(path, 6);
        require_ok(cudyn::call_driver(&DriverTable::cuStreamSynchronize_v2000, where.handle()));
        d.check_arrived();
    }
}

TEST_CASE("CopyPlan goes copy by copy on the legacy default stream, decided before any call",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    for (const cudyn::StreamRef legacy : {cudyn::StreamRef(CU_STREAM_LEGACY), cudyn::StreamRef(CUstream{nullptr})}) {
        Directions d;
        const CopyPlan plan = d.plan();
        CHECK(CopyPlan::path_for(legacy) == CopyPlan::Path::PerCopy);
        const PathCalls calls;
        CHECK(take(plan.execute(legacy)) == CopyPlan::Path::PerCopy);
        calls.check(CopyPlan::Path::PerCopy, 6);  // no batch call was tried first
        require_ok(cudyn::Stream::legacy_default().synchronize());
        d.check_arrived();
    }
}

TEST_CASE("CopyPlan::execute() without a stream is done when it returns",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    Directions d;
    const CopyPlan plan = d.plan();
    const ScopedStreamDelay slow(5000);
    CHECK(take(plan.execute()) == CopyPlan::Path::PerCopy);
    CHECK(FakeDriver::loaded().pending_work() == 0);
    d.check_arrived();
}

TEST_CASE("CopyPlan passes its source order: each order moves the bytes, DuringCall reads the sources at the call",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    for (const SourceAccessOrder order : {SourceAccessOrder::Stream, SourceAccessOrder::DuringCall, SourceAccessOrder::Any}) {
        INFO("order " << static_cast<int>(order));
        {
            Directions d;
            const CopyPlan plan = d.plan(order);
            CHECK(plan.source_order() == order);
            (void)take(plan.execute(stream));
            require_ok(stream.synchronize());
            d.check_arrived();
        }
        // Earlier work on the stream rewrites the source, the plan copies it.
        const auto source = device_words<std::uint32_t>(kWords, 7);
        const auto destination = device_words<std::uint32_t>(kWords, 0);
        CopyPlan plan(order);
        require_ok(plan.add(destination.device_span(), source.device_span()));
        const ScopedStreamDelay slow(5000);
        require_ok(source.device_span().fill(0xC0C0C0C0u, stream));
        const auto path = take(plan.execute(stream));
        if (order == SourceAccessOrder::DuringCall && path == CopyPlan::Path::PerCopy)
            CHECK(FakeDriver::loaded().pending_work() == 0);  // cudyn waited: the sources are read
        require_ok(stream.synchronize());
        // A batch with DuringCall read the source at the call, out of stream
        // order (the caller promised no earlier work uses it; this test breaks
        // that promise to see which order reached the driver). Per copy, and
        // in the other orders, the copy ran after the fill.
        const bool read_at_call = order == SourceAccessOrder::DuringCall && path != CopyPlan::Path::PerCopy;
        CHECK(read_device(destination.device_address(), kWords) ==
              (read_at_call ? iota_vector(kWords, 7) : std::vector<std::uint32_t>(kWords, 0xC0C0C0C0u)));
    }
}

TEST_CASE("CopyPlan::execute_via forces a path, or says why it cannot", "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    const bool has12 = variant() == "emulated" || variant() == "cuda12";
    const bool has13 = variant() == "emulated";
    for (const CopyPlan::Path path : {CopyPlan::Path::Batch13000, CopyPlan::Path::Batch12080, CopyPlan::Path::PerCopy}) {
        INFO(cudyn::to_string(path));
        Directions d;
        const CopyPlan plan = d.plan();
        const bool available = path == CopyPlan::Path::PerCopy ||
                               (path == CopyPlan::Path::Batch12080 ? has12 : has13);
        const PathCalls calls;
        auto ran = plan.execute_via(path, stream);
        if (!available) {
            require_error(ran, ErrorCode::NotSupported,
                          path == CopyPlan::Path::Batch13000 ? "cuMemcpyBatchAsync_v2" : "cuMemcpyBatchAsync");
            calls.check(CopyPlan::Path::PerCopy, 0);
            continue;
        }
        CHECK(take(std::move(ran)) == path);
        calls.check(path, 6);
        require_ok(stream.synchronize());
        d.check_arrived();
        if (path != CopyPlan::Path::PerCopy) {
            const PathCalls none;
            require_error(plan.execute_via(path, CU_STREAM_LEGACY), ErrorCode::InvalidArgument, "legacy default stream");
            none.check(CopyPlan::Path::PerCopy, 0);
        }
    }
}

TEST_CASE("CopyPlan checks every copy before any driver call", "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    const auto a = device_words<std::uint32_t>(2 * kWords, 0);
    const auto b = device_words<std::uint32_t>(2 * kWords, 0);
    const DeviceSpan<std::uint32_t> a0 = take(a.device_span().subspan(0, kWords));
    const DeviceSpan<std::uint32_t> a1 = take(a.device_span().subspan(kWords, kWords));
    const DeviceSpan<std::uint32_t> b0 = take(b.device_span().subspan(0, kWords));
    const DeviceSpan<std::uint32_t> b1 = take(b.device_span().subspan(kWords, kWords));
    std::vector<std::uint32_t> host(kWords);
    const DriverSnapshot before({"cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2", "cuMemcpyAsync"});

    CopyPlan plan;
    require_error(plan.execute(stream), ErrorCode::InvalidArgument, "the plan is empty");
    require_error(plan.execute(), ErrorCode::InvalidArgument, "the plan is empty");
    require_error(plan.execute_via(CopyPlan::Path::PerCopy, stream), ErrorCode::InvalidArgument, "the plan is empty");

    require_error(plan.add(a0, take(b.device_span().subspan(0, kWords - 1))), ErrorCode::InvalidArgument,
                  "the destination has 1024 elements and the source 1023");
    require_error(plan.add(DeviceSpan<std::uint32_t>(), b0), ErrorCode::InvalidArgument,
                  "the destination device span is empty");
    require_error(plan.add(a0, HostSpan<const std::uint32_t>(nullptr, kWords)), ErrorCode::InvalidArgument,
                  "the source host span has a null data pointer");
    require_error(plan.add(HostSpan<std::uint32_t>(host.data(), 0), b0), ErrorCode::InvalidArgument,
                  "the destination host span is empty");
    const CUdeviceptr top = std::numeric_limits<CUdeviceptr>::max() - 7;  // 8 bytes below the end
    require_error(plan.add(DeviceSpan<std::uint32_t>(top, 4), DeviceSpan<const std::uint32_t>(b0.device_address(), 4)),
                  ErrorCode::InvalidArgument, "wraps around");
    const std::size_t huge = std::numeric_limits<std::size_t>::max() / 4;
    require_error(plan.add(DeviceSpan<std::uint64_t>(a0.device_address(), huge),
                           DeviceSpan<const std::uint64_t>(b0.device_address(), huge)),
                  ErrorCode::InvalidArgument, "CopyPlan::add");
    require_error(plan.add(a0, take(a.device_span().subspan(10, kWords))), ErrorCode::InvalidArgument,
                  "overlaps its destination");
    require_error(plan.add_bytes(0, b0.device_address(), 16), ErrorCode::InvalidArgument, "address 0");
    require_error(plan.add_bytes(a0.device_address(), b0.device_address(), 0), ErrorCode::InvalidArgument, "0 bytes");
    CHECK(plan.empty());

    // Copies that depend on each other: the batch gives them no order.
    require_ok(plan.add(a0, b0));
    require_error(plan.add(take(a.device_span().subspan(100, 10)), take(b.device_span().subspan(kWords, 10))),
                  ErrorCode::InvalidArgument, "overlaps the destination of copy 0");
    require_error(plan.add(take(b.device_span().subspan(kWords, 2)), take(a.device_span().subspan(kWords - 1, 2))),
                  ErrorCode::InvalidArgument, "the source (8 bytes at");
    require_error(plan.add_bytes(b0.device_address() + 64, a1.device_address(), 4), ErrorCode::InvalidArgument,
                  "overlaps the source of an earlier copy");
    CHECK(plan.size() == 1);
    require_ok(plan.add(a1, b0));                    // the same source twice is fine
    require_ok(plan.add(host, b0));                  // and to the host
    std::vector<std::uint32_t> other_host(kWords);
    require_ok(plan.add_bytes(b1.device_address(), reinterpret_cast<CUdeviceptr>(other_host.data()), 16));
    CHECK(plan.size() == 4);
    before.require_untouched();

    plan.clear();
    CHECK(plan.empty());
    require_ok(plan.add(b0, a0));  // the old ranges are forgotten with the copies
}

TEST_CASE("a refused copy is named by its index where the driver says which",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    const auto big = device_words<std::uint32_t>(2 * kWords, 1);
    // 256 bytes short of a page: a span claiming the whole page runs past the
    // allocation but into no other (the fake's allocations are page-aligned).
    const auto small = device_words<std::uint32_t>(kWords - 64, 0);
    auto others = device_words<std::uint32_t>(3 * kWords, 0);
    CopyPlan plan;
    for (std::size_t i = 0; i < 2; ++i)
        require_ok(plan.add(take(others.device_span().subspan(i * kWords, kWords)),
                            take(big.device_span().subspan(0, kWords))));
    // A span made by hand that claims more than its allocation: cudyn cannot
    // see allocation ends from an address, the driver refuses it.
    require_ok(plan.add(DeviceSpan<std::uint32_t>(small.device_address(), kWords), take(big.device_span().subspan(0, kWords))));
    require_ok(plan.add(take(others.device_span().subspan(2 * kWords, kWords)), take(big.device_span().subspan(0, kWords))));

    std::vector<CopyPlan::Path> paths = {CopyPlan::Path::PerCopy};
    if (variant() == "emulated") paths.push_back(CopyPlan::Path::Batch13000);
    if (variant() == "emulated" || variant() == "cuda12") paths.push_back(CopyPlan::Path::Batch12080);
    for (const CopyPlan::Path path : paths) {
        INFO(cudyn::to_string(path));
        auto failed = plan.execute_via(path, stream);
        REQUIRE_FALSE(failed.has_value());
        const cudyn::Error& error = failed.error();
        INFO(error.describe());
        CHECK(error.code == ErrorCode::Driver);
        CHECK(error.driver_result == CUDA_ERROR_INVALID_VALUE);
        switch (path) {
            case CopyPlan::Path::PerCopy:
                CHECK(error.entry_point == "cuMemcpyAsync");
                CHECK(error.message.find("copy 3 of 4, index 2, failed; the 2 before it were issued") != std::string::npos);
                break;
            case CopyPlan::Path::Batch12080:
                CHECK(error.entry_point == "cuMemcpyBatchAsync");
                CHECK(error.message.find("the driver named copy 3 of 4, index 2: 4096 bytes") != std::string::npos);
                break;
            case CopyPlan::Path::Batch13000:
                CHECK(error.entry_point == "cuMemcpyBatchAsync_v2");
                CHECK(error.message.find("did not say which copy failed: its 13.0 ABI reports no index") !=
                      std::string::npos);
                break;
        }
        require_ok(stream.synchronize());
        // A batch is refused whole (nothing ran); per copy, the two before it ran.
        const bool ran_before = path == CopyPlan::Path::PerCopy;
        CHECK(read_device(others.device_address(), kWords) == (ran_before ? iota_vector(kWords, 1) : iota_vector(kWords, 0)));
        CHECK(read_device(others.device_address() + 2 * kWords * 4, kWords) == iota_vector(kWords, 2 * kWords));
        require_ok(others.copy_from(iota_vector(3 * kWords, 0)));
    }

    // An injected failure of the batch call: the driver named no copy.
    if (variant() == "emulated" || variant() == "cuda12") {
        const ScopedFault fault("cuMemcpyBatchAsync:1:CUDA_ERROR_INVALID_VALUE");
        CopyPlan fine;
        require_ok(fine.add(take(others.device_span().subspan(0, kWords)), take(big.device_span().subspan(0, kWords))));
        require_error(fine.execute(stream), ErrorCode::Driver, "the driver did not say which copy failed");
    }
}

TEST_CASE("a refused batch has done the host-to-host copies listed before the refused one, as driver 580 had",
          "[emulated][cuda12][copy-plan]") {
    auto context = activate(0);
    auto stream = new_stream();
    const auto small = device_words<std::uint32_t>(kWords - 64, 0);
    const std::vector<std::uint32_t> source = iota_vector(kWords, 7);
    const std::vector<std::uint32_t> device_source = iota_vector(kWords, 1);
    std::vector<std::vector<std::uint32_t>> hosts(3, std::vector<std::uint32_t>(kWords, 0));
    CopyPlan plan;
    require_ok(plan.add(HostSpan<std::uint32_t>(hosts[0]), source));
    require_ok(plan.add(HostSpan<std::uint32_t>(hosts[1]), source));
    // Runs past its allocation: the driver refuses the batch here.
    require_ok(plan.add(DeviceSpan<std::uint32_t>(small.device_address(), kWords), device_source));
    require_ok(plan.add(HostSpan<std::uint32_t>(hosts[2]), source));
    auto failed = plan.execute(stream);
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().message.find("host-to-host copies listed before the refused one may have been done") !=
          std::string::npos);
    require_ok(stream.synchronize());
    CHECK(hosts[0] == source);  // done at the call, before the refusal
    CHECK(hosts[1] == source);
    CHECK(hosts[2] == std::vector<std::uint32_t>(kWords, 0));  // listed after it: not done, nothing queued
    CHECK(read_device(small.device_address(), kWords - 64) == iota_vector(kWords - 64, 0));
}

// --- the waits a plan's documentation asks for -------------------------------------------------------

namespace {

// The fake's device memory is host memory at the device address: the bytes
// the copies have written so far, read without any stream or wait.
std::vector<std::uint32_t> words_now(CUdeviceptr address, std::size_t count) {
    std::vector<std::uint32_t> words(count);
    const auto* at = reinterpret_cast<const volatile std::uint32_t*>(static_cast<std::uintptr_t>(address));
    for (std::size_t i = 0; i < count; ++i) words[i] = at[i];
    return words;
}

}  // namespace

TEST_CASE("CopyPlan::execute(stream) from pageable memory: a batch in stream order returns once done, the other "
          "orders at once; reading the destination needs the documented stream wait, and the wait is enough",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    // As driver 580 did with a batch behind a long kernel: a pageable source
    // in stream order returns once the copy is done; DURING_API_CALL and ANY
    // return at once with the source (its first 64 KiB) taken. cuMemcpyAsync
    // (the per-copy path) stages a pageable source and returns at once.
    auto context = activate(0);
    auto stream = new_stream();
    for (const SourceAccessOrder order : {SourceAccessOrder::Stream, SourceAccessOrder::DuringCall, SourceAccessOrder::Any}) {
        INFO("order " << static_cast<int>(order));
        std::vector<std::uint32_t> pageable = iota_vector(kWords, 3000);
        const auto destination = device_words<std::uint32_t>(kWords, 0);
        CopyPlan plan(order);
        require_ok(plan.add(destination.device_span(), pageable));
        {
            const ScopedStreamDelay slow(20000);
            const auto path = take(plan.execute(stream));
            const bool batch = path != CopyPlan::Path::PerCopy;
            if (order == SourceAccessOrder::DuringCall || (batch && order == SourceAccessOrder::Stream)) {
                // cudyn waits for DuringCall's promise; a stream-order batch waited itself.
                CHECK(words_now(destination.device_address(), kWords) == iota_vector(kWords, 3000));
            } else {
                // Read without the wait: the copy has not run yet.
                CHECK(FakeDriver::loaded().pending_work() > 0);
                CHECK(words_now(destination.device_address(), kWords) == iota_vector(kWords, 0));
            }
            if (order != SourceAccessOrder::Any) pageable.assign(kWords, 0xDEADu);  // the source may be reused now
            require_ok(stream.synchronize());  // the documented wait
        }
        CHECK(words_now(destination.device_address(), kWords) == iota_vector(kWords, 3000));
    }
}

TEST_CASE("CopyPlan DuringCall: a large pageable source may be reused as soon as execute returns",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    // The batch takes only a pageable source's first bytes at the call and
    // reads the rest when the copy runs (driver 580 read the tail of a
    // 64 MiB source after the call returned): without cudyn's wait, the
    // overwrite below would reach the destination's tail.
    auto context = activate(0);
    auto stream = new_stream();
    constexpr std::size_t kLarge = std::size_t{1} << 18;  // 1 MiB of words: beyond what is taken at the call
    std::vector<std::uint32_t> pageable = iota_vector(kLarge, 7000);
    const auto destination = device_words<std::uint32_t>(kLarge, 0);
    CopyPlan plan(SourceAccessOrder::DuringCall);
    require_ok(plan.add(destination.device_span(), pageable));
    {
        const ScopedStreamDelay slow(20000);
        (void)take(plan.execute(stream));
        pageable.assign(kLarge, 0xDEADu);
    }
    require_ok(stream.synchronize());
    const auto written = words_now(destination.device_address(), kLarge);
    const auto expected = iota_vector(kLarge, 7000);
    const auto differ = std::mismatch(written.begin(), written.end(), expected.begin());
    INFO("first word that differs: " << (differ.first - written.begin()) << " of " << kLarge);
    CHECK(differ.first == written.end());
}

TEST_CASE("CopyPlan::execute(stream) into pinned or pageable memory returns before the copy ran",
          "[emulated][cuda12][cuda11][legacy][copy-plan]") {
    // Driver 580 returned from a batch into a 4 KiB pageable destination
    // before writing it (and from a 64 MiB one with it written in part).
    auto context = activate(0);
    auto stream = new_stream();
    const auto source = device_words<std::uint32_t>(kWords, 4000);
    auto pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(kWords));
    std::fill(pinned.begin(), pinned.end(), 0u);
    std::vector<std::uint32_t> pageable(kWords, 0u);
    {
        CopyPlan plan;
        require_ok(plan.add(pinned.span(), source.device_span()));
        const ScopedStreamDelay slow(20000);
        (void)take(plan.execute(stream));
        // Without the wait the pinned destination still holds its old bytes.
        CHECK(std::vector<std::uint32_t>(pinned.begin(), pinned.end()) == std::vector<std::uint32_t>(kWords, 0u));
        require_ok(stream.synchronize());
        CHECK(std::vector<std::uint32_t>(pinned.begin(), pinned.end()) == iota_vector(kWords, 4000));
    }
    {
        CopyPlan plan;
        require_ok(plan.add(HostSpan<std::uint32_t>(pageable), source.device_span()));
        const ScopedStreamDelay slow(20000);
        const auto path = take(plan.execute(stream));
        if (path != CopyPlan::Path::PerCopy) CHECK(pageable == std::vector<std::uint32_t>(kWords, 0u));
        require_ok(stream.synchronize());
        CHECK(pageable == iota_vector(kWords, 4000));
    }
}
