// gpu suite: CopyPlan on the real driver. Driver 580 (13.0) exports both
// cuMemcpyBatchAsync ABIs (docs/measurements/h200-2026-11-25-batch-dmabuf-
// hostvmm-pointers.md), so every path is forced in turn with execute_via:
// the 13.0 batch, the 12.8 batch and one cuMemcpyAsync per copy, each with
// every source order, checking the bytes of every direction; the legacy
// default stream going copy by copy; and a copy the driver refuses, named by
// its index where the ABI reports one.
// Skips (exit 77) where no device is present: see tests/support/test_main.cpp.
#include "support/catch.hpp"
#include "support/vmm_helpers.hpp"  // take, require_ok

#include "cudyn/memory/copy_plan.hpp"
#include "cudyn/device/device.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/device/stream.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using cudyn::CopyPlan;
using cudyn::DeviceSpan;
using cudyn::HostSpan;
using cudyn::SourceAccessOrder;
using cudyn_test::require_ok;
using cudyn_test::take;

namespace {

constexpr std::size_t kWords = 1024;  // 4 KiB per copy

cudyn::PrimaryContext activate_device0() {
    auto device = take(cudyn::Device::get(0));
    return take(cudyn::PrimaryContext::activate(device));
}

std::vector<std::uint32_t> iota(std::size_t n, std::uint32_t first) {
    std::vector<std::uint32_t> values(n);
    std::iota(values.begin(), values.end(), first);
    return values;
}

std::vector<std::uint32_t> read_words(CUdeviceptr address, std::size_t n) {
    std::vector<std::uint32_t> words(n);
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, words.data(), address, n * 4));
    return words;
}

cudyn::DeviceBuffer<std::uint32_t> device_words(std::size_t n, std::uint32_t first) {
    auto buffer = take(cudyn::DeviceBuffer<std::uint32_t>::allocate(n));
    require_ok(buffer.copy_from(iota(n, first)));
    return buffer;
}

// The paths this driver can take (driver 580: all three).
std::vector<CopyPlan::Path> available_paths() {
    std::vector<CopyPlan::Path> paths;
    if (cudyn::has_entry(&cudyn::DriverTable::cuMemcpyBatchAsync_v13000)) paths.push_back(CopyPlan::Path::Batch13000);
    if (cudyn::has_entry(&cudyn::DriverTable::cuMemcpyBatchAsync_v12080)) paths.push_back(CopyPlan::Path::Batch12080);
    paths.push_back(CopyPlan::Path::PerCopy);
    return paths;
}

// Every direction, 4 KiB each: pinned and pageable host to device, device to
// device, device to pageable and to pinned host, host to host.
struct Directions {
    cudyn::PinnedBuffer<std::uint32_t> pinned = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(kWords));
    std::vector<std::uint32_t> pageable = iota(kWords, 2000);
    cudyn::DeviceBuffer<std::uint32_t> device = device_words(3 * kWords, 0);
    cudyn::DeviceBuffer<std::uint32_t> source = device_words(kWords, 5000);
    std::vector<std::uint32_t> back = std::vector<std::uint32_t>(kWords, 0);
    cudyn::PinnedBuffer<std::uint32_t> pinned_back = take(cudyn::PinnedBuffer<std::uint32_t>::allocate(kWords));
    std::vector<std::uint32_t> host_copy = std::vector<std::uint32_t>(kWords, 0);

    Directions() {
        const auto values = iota(kWords, 1000);
        std::copy(values.begin(), values.end(), pinned.data());
        std::fill(pinned_back.begin(), pinned_back.end(), 0u);
    }
    DeviceSpan<std::uint32_t> third(std::size_t i) const { return take(device.device_span().subspan(i * kWords, kWords)); }
    CopyPlan plan(SourceAccessOrder order) {
        CopyPlan made(order);
        require_ok(made.add(third(0), pinned.span()));
        require_ok(made.add(third(1), pageable));
        require_ok(made.add(third(2), source.device_span()));
        require_ok(made.add(back, source.device_span()));
        require_ok(made.add(pinned_back.span(), source.device_span()));
        require_ok(made.add(HostSpan<std::uint32_t>(host_copy), pageable));
        return made;
    }
    void check_arrived() const {
        CHECK(read_words(device.device_address(), kWords) == iota(kWords, 1000));
        CHECK(read_words(device.device_address() + kWords * 4, kWords) == iota(kWords, 2000));
        CHECK(read_words(device.device_address() + 2 * kWords * 4, kWords) == iota(kWords, 5000));
        CHECK(back == iota(kWords, 5000));
        CHECK(std::vector<std::uint32_t>(pinned_back.begin(), pinned_back.end()) == iota(kWords, 5000));
        CHECK(host_copy == iota(kWords, 2000));
    }
};

}  // namespace

TEST_CASE("a 13.0 driver has both copy-batch ABIs, and a created stream takes the 13.0 one", "[gpu][copy-plan]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    if (cudyn::load_report().driver_version < 12080) {
        CHECK(CopyPlan::path_for(stream) == CopyPlan::Path::PerCopy);
        return;
    }
    CHECK(cudyn::has_entry(&cudyn::DriverTable::cuMemcpyBatchAsync_v12080));
    if (cudyn::load_report().driver_version >= 13000) {
        CHECK(cudyn::has_entry(&cudyn::DriverTable::cuMemcpyBatchAsync_v13000));
        CHECK(reinterpret_cast<void*>(cudyn::driver().cuMemcpyBatchAsync_v13000) !=
              reinterpret_cast<void*>(cudyn::driver().cuMemcpyBatchAsync_v12080));
        CHECK(CopyPlan::path_for(stream) == CopyPlan::Path::Batch13000);
        CHECK(CopyPlan::path_for(CU_STREAM_PER_THREAD) == CopyPlan::Path::Batch13000);
    }
    CHECK(CopyPlan::path_for(CU_STREAM_LEGACY) == CopyPlan::Path::PerCopy);
    CHECK(CopyPlan::path_for(CUstream{nullptr}) == CopyPlan::Path::PerCopy);
}

TEST_CASE("the table holds each cuMemcpyBatchAsync ABI in its legacy-stream form", "[gpu][copy-plan]") {
    void* library = ::dlopen(cudyn::load_report().library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(library != nullptr);
    auto proc_address = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(library, "cuGetProcAddress_v2"));
    REQUIRE(proc_address != nullptr);
    const auto ask = [&](int version, cuuint64_t flags) {
        void* function = nullptr;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        const CUresult rc = proc_address("cuMemcpyBatchAsync", &function, version, flags, &status);
        return rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? function : nullptr;
    };
    const cudyn::DriverTable& table = cudyn::driver();
    const struct {
        int version;
        void* ours;
    } abis[] = {{12080, reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v12080)},
                {13000, reinterpret_cast<void*>(table.cuMemcpyBatchAsync_v13000)}};
    for (const auto& abi : abis) {
        INFO("cuMemcpyBatchAsync@" << abi.version);
        if (cudyn::load_report().driver_version < abi.version) {
            CHECK(abi.ours == nullptr);
            continue;
        }
        REQUIRE(abi.ours != nullptr);
        CHECK(abi.ours == ask(abi.version, CU_GET_PROC_ADDRESS_LEGACY_STREAM));
        CHECK(abi.ours != ask(abi.version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    }
}

TEST_CASE("CopyPlan moves every direction on every path and in every source order", "[gpu][copy-plan]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    for (const CopyPlan::Path path : available_paths()) {
        for (const SourceAccessOrder order : {SourceAccessOrder::Stream, SourceAccessOrder::DuringCall, SourceAccessOrder::Any}) {
            INFO(cudyn::to_string(path) << ", order " << static_cast<int>(order));
            Directions d;
            const CopyPlan plan = d.plan(order);
            CHECK(take(plan.execute_via(path, stream)) == path);
            require_ok(stream.synchronize());
            d.check_arrived();
        }
    }
    // Without forcing: the path path_for names, on a created and the per-thread stream.
    for (const cudyn::StreamRef where : {cudyn::StreamRef(stream), cudyn::StreamRef(CU_STREAM_PER_THREAD)}) {
        Directions d;
        const CopyPlan plan = d.plan(SourceAccessOrder::Stream);
        CHECK(take(plan.execute(where)) == CopyPlan::path_for(where));
        require_ok(cudyn::call_driver(&cudyn::DriverTable::cuStreamSynchronize_v2000, where.handle()));
        d.check_arrived();
    }
}

TEST_CASE("DuringCall: the sources may change once execute returns", "[gpu][copy-plan]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    for (const CopyPlan::Path path : available_paths()) {
        INFO(cudyn::to_string(path));
        std::array<std::uint32_t, kWords> ephemeral{};  // a stack buffer, the case the order is for
        std::iota(ephemeral.begin(), ephemeral.end(), 300u);
        auto destination = device_words(kWords, 0);
        CopyPlan plan(SourceAccessOrder::DuringCall);
        require_ok(plan.add(destination.device_span(), ephemeral));
        CHECK(take(plan.execute_via(path, stream)) == path);
        ephemeral.fill(0xDEADBEEFu);  // the copy has read it: cudyn waited on the per-copy path
        require_ok(stream.synchronize());
        CHECK(read_words(destination.device_address(), kWords) == iota(kWords, 300));
    }
}

TEST_CASE("CopyPlan goes copy by copy on the legacy default stream; the batch is never tried there",
          "[gpu][copy-plan]") {
    auto context = activate_device0();
    for (const cudyn::StreamRef legacy : {cudyn::StreamRef(CU_STREAM_LEGACY), cudyn::StreamRef(CUstream{nullptr})}) {
        Directions d;
        const CopyPlan plan = d.plan(SourceAccessOrder::Stream);
        CHECK(take(plan.execute(legacy)) == CopyPlan::Path::PerCopy);
        require_ok(cudyn::Stream::legacy_default().synchronize());
        d.check_arrived();
        for (const CopyPlan::Path path : available_paths()) {
            if (path == CopyPlan::Path::PerCopy) continue;
            auto refused = plan.execute_via(path, legacy);
            REQUIRE_FALSE(refused.has_value());
            CHECK(refused.error().code == cudyn::ErrorCode::InvalidArgument);
        }
    }
    // Synchronous: done when it returns.
    Directions d;
    const CopyPlan plan = d.plan(SourceAccessOrder::Stream);
    CHECK(take(plan.execute()) == CopyPlan::Path::PerCopy);
    d.check_arrived();
}

TEST_CASE("a copy the batch refuses is named by its index on the 12.8 ABI; nothing of the batch is queued",
          "[gpu][copy-plan]") {
    auto context = activate_device0();
    auto stream = take(cudyn::Stream::create());
    constexpr std::size_t kMiBWords = (std::size_t{1} << 20) / 4;
    // Copy 2 writes 4 KiB past the end of a 1 MiB allocation (a span made by
    // hand: cudyn cannot see allocation ends from an address); the others go
    // host to host, so no range of theirs can lie where that tail reaches
    // (cudyn would refuse the overlap before the driver saw it).
    auto short_buffer = device_words(kMiBWords, 0);
    const std::vector<std::uint32_t> long_source = iota(kMiBWords + kWords, 1);
    const std::vector<std::uint32_t> small_source = iota(kWords, 7);
    std::vector<std::vector<std::uint32_t>> others(3, std::vector<std::uint32_t>(kWords, 0));
    CopyPlan plan;
    require_ok(plan.add(HostSpan<std::uint32_t>(others[0]), small_source));
    require_ok(plan.add(HostSpan<std::uint32_t>(others[1]), small_source));
    require_ok(plan.add(DeviceSpan<std::uint32_t>(short_buffer.device_address(), kMiBWords + kWords), long_source));
    require_ok(plan.add(HostSpan<std::uint32_t>(others[2]), small_source));

    for (const CopyPlan::Path path : available_paths()) {
        if (path == CopyPlan::Path::PerCopy) continue;  // cuMemcpyAsync's answer to this range was not measured
        INFO(cudyn::to_string(path));
        auto failed = plan.execute_via(path, stream);
        REQUIRE_FALSE(failed.has_value());
        INFO(failed.error().describe());
        CHECK(failed.error().driver_result == CUDA_ERROR_INVALID_VALUE);
        if (path == CopyPlan::Path::Batch12080)
            CHECK(failed.error().message.find("the driver named copy 3 of 4, index 2") != std::string::npos);
        else
            CHECK(failed.error().message.find("did not say which copy failed") != std::string::npos);
        CHECK(failed.error().message.find("host-to-host copies listed before the refused one may have been done") !=
              std::string::npos);
        require_ok(stream.synchronize());
        // Nothing was queued: the copy after the refused one and the device
        // memory are untouched. The host-to-host copies listed before it
        // are another matter: driver 580 had done them, wholly or in part,
        // when it refused the batch. Each of their words is the old or the
        // new value, nothing else.
        CHECK(others[2] == std::vector<std::uint32_t>(kWords, 0));
        for (std::size_t j = 0; j < 2; ++j) {
            bool old_or_new = true;
            for (std::size_t w = 0; w < kWords; ++w)
                old_or_new = old_or_new && (others[j][w] == 0 || others[j][w] == small_source[w]);
            CHECK(old_or_new);
            others[j].assign(kWords, 0);
        }
        CHECK(read_words(short_buffer.device_address(), kWords) == iota(kWords, 0));
    }
}
