// The entry-point chain picks the right route on each fake driver variant
// (each entry independently), and a missing entry gives NotSupported from the call that
// needs it while the others work.
#include "support/catch.hpp"
#include "support/fake_driver.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"
#include "cudyn/device/primary_context.hpp"

#include <cstring>
#include <string>

using cudyn::DriverTable;
using cudyn::LoadState;
using cudyn::ResolvedVia;
using cudyn_test::FakeDriver;

namespace {

const cudyn::EntryPointReport& report_of(const char* abi_symbol) {
    const cudyn::EntryPointReport* entry = cudyn::load_report().find(abi_symbol);
    INFO(abi_symbol);
    REQUIRE(entry != nullptr);
    return *entry;
}

}  // namespace

TEST_CASE("emulated (13.0): every entry via cuGetProcAddress_v2, asked by base name at the typedef version",
          "[emulated][chain]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    REQUIRE(report.state == LoadState::Loaded);
    CHECK(report.driver_version == 13000);
    CHECK(report.init_result == CUDA_SUCCESS);
#if defined(_WIN32)
    CHECK(report.library_path.find("tests\\fakecuda\\emulated\\libcuda") != std::string::npos);  // a DLL, under wine
#else
    CHECK(report.library_path.find("tests/fakecuda/emulated/libcuda.so") != std::string::npos);
#endif
    const FakeDriver& fake = FakeDriver::loaded();
    CHECK(fake.variant() == "emulated");

    for (const cudyn::EntryPointReport& entry : report.entry_points) {
        INFO(entry.abi_symbol);
        CHECK(entry.via == ResolvedVia::ProcAddressV2);
    }
    // Each request names the base symbol, pins the typedef's version and asks
    // for the legacy-stream form explicitly.
    int requests = 0;
    for (int i = 0; i < fake.proc_request_count(); ++i) {
        const fakecuda_proc_record request = fake.proc_request(i);
        if (std::string(request.entry) != "cuGetProcAddress_v2") continue;
        ++requests;
        INFO(request.symbol << "@" << request.version);
        CHECK(std::strstr(request.symbol, "_v2") == nullptr);
        CHECK(request.flags == CU_GET_PROC_ADDRESS_LEGACY_STREAM);
        CHECK(request.version <= 13000);
    }
    CHECK(requests == static_cast<int>(cudyn::driver_entry_count));
}

TEST_CASE("emulated: stream entries hold the legacy-stream functions, not _ptsz", "[emulated][chain]") {
    const FakeDriver& fake = FakeDriver::loaded();
    const DriverTable& table = cudyn::driver();
    void* legacy = fake.symbol("cuMemcpyHtoDAsync_v2");
    void* per_thread = fake.symbol("cuMemcpyHtoDAsync_v2_ptsz");
    REQUIRE(legacy != nullptr);
    REQUIRE(per_thread != nullptr);
    CHECK(reinterpret_cast<void*>(table.cuMemcpyHtoDAsync_v3020) == legacy);
    CHECK(reinterpret_cast<void*>(table.cuMemPrefetchAsync_v12020) == fake.symbol("cuMemPrefetchAsync_v2"));
    CHECK(reinterpret_cast<void*>(table.cuStreamSynchronize_v2000) == fake.symbol("cuStreamSynchronize"));
    // The two ABIs of one name are two different functions.
    CHECK(reinterpret_cast<void*>(table.cuMemAdvise_v8000) == fake.symbol("cuMemAdvise"));
    CHECK(reinterpret_cast<void*>(table.cuMemAdvise_v12020) == fake.symbol("cuMemAdvise_v2"));
}

TEST_CASE("cuda11 (11.8): cuGetProcAddress v1 only, no location-ABI advise/prefetch, no batch",
          "[cuda11][chain]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    REQUIRE(report.state == LoadState::Loaded);
    CHECK(report.driver_version == 11080);
    CHECK_FALSE(report.has_proc_address_v2);
    CHECK(report.has_proc_address);
    CHECK(FakeDriver::loaded().variant() == "cuda11");

    for (const char* absent : {"cuMemAdvise_v2", "cuMemPrefetchAsync_v2", "cuMemPrefetchBatchAsync"}) {
        INFO(absent);
        CHECK(report_of(absent).via == ResolvedVia::None);
    }
    for (const cudyn::EntryPointReport& entry : report.entry_points) {
        if (!entry.resolved()) continue;
        INFO(entry.abi_symbol);
        CHECK(entry.via == ResolvedVia::ProcAddress);
    }
    CHECK(report_of("cuMemAdvise").via == ResolvedVia::ProcAddress);
    CHECK(report_of("cuMemCreate").via == ResolvedVia::ProcAddress);
    CHECK(report.missing_required().empty());
}

TEST_CASE("cuda11: a missing entry is NotSupported from the call that needs it, others work",
          "[cuda11][chain]") {
    auto device = cudyn::Device::get(0);
    REQUIRE(device.has_value());
    auto context = cudyn::PrimaryContext::activate(*device);
    REQUIRE(context.has_value());

    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = 0;
    auto missing = cudyn::call_driver(&DriverTable::cuMemAdvise_v12020, CUdeviceptr{0x1000}, std::size_t{64},
                                      CU_MEM_ADVISE_SET_READ_MOSTLY, location);
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().code == cudyn::ErrorCode::NotSupported);
    CHECK(missing.error().entry_point == "cuMemAdvise_v2");
    CHECK(missing.error().message.find("11.8") != std::string::npos);

    CUdeviceptr pointer = 0;
    REQUIRE(cudyn::call_driver(&DriverTable::cuMemAlloc_v3020, &pointer, std::size_t{256}).has_value());
    CHECK(cudyn::call_driver(&DriverTable::cuMemFree_v3020, pointer).has_value());
}

TEST_CASE("legacy (10.1): no cuGetProcAddress, everything by dlsym, no VMM", "[legacy][chain]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    REQUIRE(report.state == LoadState::Loaded);
    CHECK(report.driver_version == 10010);
    CHECK_FALSE(report.has_proc_address_v2);
    CHECK_FALSE(report.has_proc_address);
    CHECK(FakeDriver::loaded().variant() == "legacy");
    for (const cudyn::EntryPointReport& entry : report.entry_points) {
        INFO(entry.abi_symbol);
        // Everything newer than 10.1 (VMM is 10.2) is absent; the rest is exported.
        if (entry.version > 10010)
            CHECK(entry.via == ResolvedVia::None);
        else
            CHECK(entry.via == ResolvedVia::Dlsym);
    }
    CHECK(report.missing_required().empty());

    auto reserve = cudyn::call_driver(&DriverTable::cuMemAddressReserve_v10020, static_cast<CUdeviceptr*>(nullptr),
                                      std::size_t{1} << 21, std::size_t{0}, CUdeviceptr{0}, 0ULL);
    REQUIRE_FALSE(reserve.has_value());
    CHECK(reserve.error().code == cudyn::ErrorCode::NotSupported);
    CHECK(reserve.error().entry_point == "cuMemAddressReserve");
}

TEST_CASE("legacy: the primary context is released through the 7.0 ABI", "[legacy][chain]") {
    const FakeDriver& fake = FakeDriver::loaded();
    auto device = cudyn::Device::get(0);
    REQUIRE(device.has_value());
    {
        auto context = cudyn::PrimaryContext::retain(*device);
        REQUIRE(context.has_value());
        CHECK(fake.primary_ctx_refcount(0) == 1);
    }
    CHECK(fake.primary_ctx_refcount(0) == 0);
    CHECK(fake.call_count("cuDevicePrimaryCtxRelease") == 1);
    CHECK(fake.call_count("cuDevicePrimaryCtxRelease_v2") == 0);
}

TEST_CASE("a stub driver is reported as stub and every call says StubDriver", "[stub][nvidia-stub][chain]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    CHECK(report.state == LoadState::Stub);
    CHECK(report.init_result == CUDA_ERROR_STUB_LIBRARY);
    CHECK(report.driver_version == 0);  // the stub leaves the output unwritten
    CHECK(report.message.find("stub") != std::string::npos);
    CHECK_FALSE(report.library_path.empty());

    auto status = cudyn::driver_status();
    REQUIRE_FALSE(status.has_value());
    CHECK(status.error().code == cudyn::ErrorCode::StubDriver);
    CHECK(status.error().driver_result == CUDA_ERROR_STUB_LIBRARY);
    auto count = cudyn::Device::count();
    REQUIRE_FALSE(count.has_value());
    CHECK(count.error().code == cudyn::ErrorCode::StubDriver);
    // Our own name table answers where the stub's cuGetErrorName would not.
    CHECK(std::string(cudyn::cuda_error_name(CUDA_ERROR_STUB_LIBRARY)) == "CUDA_ERROR_STUB_LIBRARY");
}

TEST_CASE("fake stub: loaded once, no emulated work done", "[stub][chain]") {
    const FakeDriver& fake = FakeDriver::loaded();
    CHECK(fake.variant() == "stub");
    CHECK(fake.init_count() == 1);
    CHECK(fake.call_count("cuInit") == 1);
    CHECK(fake.live_allocations() == 0);
}

TEST_CASE("broken: cuInit fails with NO_DEVICE, reported as init_failed", "[broken][chain]") {
    const cudyn::LoadReport& report = cudyn::load_report();
    CHECK(report.state == LoadState::InitFailed);
    CHECK(report.init_result == CUDA_ERROR_NO_DEVICE);
    CHECK(report.driver_version == 13000);
    CHECK(report.message.find("CUDA_ERROR_NO_DEVICE") != std::string::npos);
    auto count = cudyn::Device::count();
    REQUIRE_FALSE(count.has_value());
    CHECK(count.error().code == cudyn::ErrorCode::DriverInitFailed);
    CHECK(count.error().driver_result == CUDA_ERROR_NO_DEVICE);
    CHECK(count.error().entry_point == "cuInit");
    // Calls never reached the driver: the loader answered for it.
    CHECK(FakeDriver::loaded().call_count("cuDeviceGetCount") == 0);
}

#if defined(__linux__)
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>

namespace {

struct CodeSegment {
    std::uintptr_t inside = 0;
    std::uintptr_t begin = 0;
    std::size_t bytes = 0;
    bool shared_object = false;
};

int find_code_segment(dl_phdr_info* info, std::size_t, void* data) {
    auto* segment = static_cast<CodeSegment*>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& header = info->dlpi_phdr[i];
        if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
        const std::uintptr_t begin = info->dlpi_addr + header.p_vaddr;
        if (segment->inside < begin || segment->inside - begin >= header.p_memsz) continue;
        segment->begin = begin;
        segment->bytes = header.p_memsz;
        segment->shared_object = info->dlpi_name != nullptr && info->dlpi_name[0] != '\0';
        return 1;
    }
    return 0;
}

// Pages of [begin, begin + bytes) that are not mapped into this process now
// (the "present" bit of /proc/self/pagemap), or -1 when it cannot be read.
long absent_pages(std::uintptr_t begin, std::size_t bytes) {
    const long page = ::sysconf(_SC_PAGESIZE);
    const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || page <= 0) return -1;
    long absent = 0;
    for (std::uintptr_t at = begin & ~static_cast<std::uintptr_t>(page - 1); at < begin + bytes; at += page) {
        std::uint64_t entry = 0;
        const auto offset = static_cast<off_t>(at / static_cast<std::uintptr_t>(page) * sizeof entry);
        if (::pread(fd, &entry, sizeof entry, offset) != static_cast<ssize_t>(sizeof entry)) {
            absent = -1;
            break;
        }
        if ((entry >> 63) == 0) ++absent;
    }
    ::close(fd);
    return absent;
}

}  // namespace

TEST_CASE("once the driver is loaded, every page of libcudyn's code is mapped: no first call pays a code page fault",
          "[emulated][chain]") {
    REQUIRE(cudyn::load_report().state == LoadState::Loaded);
    CodeSegment segment;
    segment.inside = reinterpret_cast<std::uintptr_t>(&cudyn::load_report);
    REQUIRE(::dl_iterate_phdr(find_code_segment, &segment) == 1);
    REQUIRE(segment.shared_object);  // the suites link the shared library
    REQUIRE(segment.bytes > 0);
    // Nothing in this process has run most of the library's code, so without
    // the residency step most of these pages would be absent.
    CHECK(absent_pages(segment.begin, segment.bytes) == 0);
}
#endif
