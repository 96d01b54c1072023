// The downstream program's own tests, one case per process (cudyn loads the
// driver once per process), each run by the consumer projects' test
// definitions on one of cudyn's installed fake drivers:
//
//   arena_tests memory       emulated: device memory round trip
//   arena_tests growth       emulated: grows in place, address and bytes kept
//   arena_tests old-driver   legacy (a 10.1 driver, no VMM): grows by copying
//   arena_tests share        emulated: a second process opens and writes the memory
//   arena_tests fault        emulated: the driver fails half-way through a grow
//                            (fakecuda_set_fail from <cudyn/fake/fakecuda_probe.h>)
//   arena_tests stub         stub: the toolkit's stub library, the program carries on
//   arena_tests no-driver    no driver at all, the program carries on
//
// Exit 0 when the case passed, 1 with a message when not.
#include "arena.hpp"

#include <cudyn/fake/fakecuda_probe.h>

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

int failed(const std::string& what) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    return 1;
}
int failed(const std::string& what, const cudyn::Error& error) { return failed(what + ": " + error.describe()); }

std::vector<std::uint8_t> pattern(std::size_t count, std::uint8_t seed) {
    std::vector<std::uint8_t> bytes(count);
    for (std::size_t i = 0; i < count; ++i) bytes[i] = static_cast<std::uint8_t>(seed + i * 7);
    return bytes;
}

// A probe function of the fake driver cudyn loaded, found without linking it.
template <typename Function>
Function fake_probe(const char* name) {
    void* driver = dlopen(cudyn::load_report().library_path.c_str(), RTLD_NOLOAD | RTLD_NOW);
    return driver ? reinterpret_cast<Function>(dlsym(driver, name)) : nullptr;
}

int memory() {
    auto arena = arena::Arena::create(16 * kMiB);
    if (!arena) return failed("create", arena.error());
    if (auto grown = arena->grow_to(kMiB); !grown) return failed("grow", grown.error());
    const auto written = pattern(4096, 3);
    if (auto ok = arena->write(100, written); !ok) return failed("write", ok.error());
    auto back = arena->read(100, written.size());
    if (!back) return failed("read", back.error());
    return *back == written ? 0 : failed("the bytes read back differ from those written");
}

int growth(bool expect_in_place) {
    auto arena = arena::Arena::create(64 * kMiB);
    if (!arena) return failed("create", arena.error());
    if (arena->grows_in_place() != expect_in_place)
        return failed(expect_in_place ? "no VMM on a driver that has it" : "VMM on a driver without it");
    if (auto grown = arena->grow_to(kMiB); !grown) return failed("grow to 1 MiB", grown.error());
    const auto first = pattern(kMiB, 11);
    if (auto ok = arena->write(0, first); !ok) return failed("write", ok.error());
    const CUdeviceptr before = arena->address();
    if (auto grown = arena->grow_to(40 * kMiB); !grown) return failed("grow to 40 MiB", grown.error());
    if (arena->size() < 40 * kMiB) return failed("grew to " + std::to_string(arena->size()) + " bytes only");
    if (expect_in_place && arena->address() != before) return failed("the address moved while growing in place");
    auto kept = arena->read(0, first.size());
    if (!kept) return failed("read", kept.error());
    return *kept == first ? 0 : failed("growing lost the bytes written before");
}

// Runs this program again as `share-child DESCRIPTOR`; its exit status.
int run_child(const std::string& descriptor) {
    std::string self = "/proc/self/exe";
    char* arguments[] = {self.data(), const_cast<char*>("share-child"), const_cast<char*>(descriptor.c_str()),
                         nullptr};
    pid_t child = 0;
    if (posix_spawn(&child, self.c_str(), nullptr, nullptr, arguments, environ) != 0) return -1;
    int status = 0;
    if (waitpid(child, &status, 0) != child) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int share() {
    auto block = arena::share_block(kMiB);
    if (!block) return failed("share", block.error());
    if (auto ok = block->memory.device_span().copy_from(cudyn::HostSpan<const std::uint8_t>(pattern(kMiB, 1))); !ok)
        return failed("write", ok.error());
    const int child = run_child(block->descriptor);
    if (child != 0) return failed("the second process exited with " + std::to_string(child));
    std::vector<std::uint8_t> seen(kMiB);
    if (auto ok = block->memory.copy_to(cudyn::HostSpan<std::uint8_t>(seen)); !ok) return failed("read", ok.error());
    return seen == pattern(kMiB, 2) ? 0 : failed("the second process's bytes are not in the memory");
}

int share_child(const std::string& descriptor) {
    if (!arena::open_gpu().usable) return failed("no GPU in the second process");
    auto opened = arena::open_shared(descriptor);
    if (!opened) return failed("open", opened.error());
    auto bytes = opened->device_span_as<std::uint8_t>();
    if (!bytes) return failed("span", bytes.error());
    std::vector<std::uint8_t> seen(kMiB);
    if (auto ok = bytes->copy_to(cudyn::HostSpan<std::uint8_t>(seen)); !ok) return failed("read", ok.error());
    if (seen != pattern(kMiB, 1)) return failed("the first process's bytes are not in the opened memory");
    if (auto ok = bytes->copy_from(cudyn::HostSpan<const std::uint8_t>(pattern(kMiB, 2))); !ok)
        return failed("write", ok.error());
    return 0;
}

// The driver refuses the second physical allocation of a grow: the arena
// must keep its size and bytes, leak nothing, and grow once the driver works.
int fault() {
    auto set_fail = fake_probe<PFN_fakecuda_set_fail>("fakecuda_set_fail");
    auto live = fake_probe<PFN_fakecuda_live_allocations>("fakecuda_live_allocations");
    if (!set_fail || !live) return failed("not on cudyn's fake driver (fakecuda_set_fail not found)");
    const long live_before = live();
    {
        auto arena = arena::Arena::create(64 * kMiB);
        if (!arena) return failed("create", arena.error());
        if (auto grown = arena->grow_to(2 * kMiB); !grown) return failed("first grow", grown.error());
        const std::size_t size = arena->size();
        const auto first = pattern(size, 5);
        if (auto ok = arena->write(0, first); !ok) return failed("write", ok.error());

        set_fail("cuMemCreate:2");  // from now on: the 2nd cuMemCreate answers CUDA_ERROR_OUT_OF_MEMORY
        auto refused = arena->grow_to(size + 3 * kMiB);
        if (refused) return failed("the grow succeeded though the driver failed half-way");
        if (refused.error().code != cudyn::ErrorCode::OutOfMemory) return failed("wrong error", refused.error());
        if (arena->size() != size) return failed("a failed grow changed the size");
        auto kept = arena->read(0, size);
        if (!kept || *kept != first) return failed("a failed grow lost the bytes");

        if (auto grown = arena->grow_to(size + 3 * kMiB); !grown) return failed("grow after the fault", grown.error());
        set_fail("");
    }
    if (live() != live_before) return failed("allocations leaked: " + std::to_string(live() - live_before));
    return 0;
}

// Without a usable driver the program says why and carries on: every cudyn
// call answers the same error, nothing crashes.
int without_gpu(cudyn::ErrorCode expected) {
    const arena::Gpu gpu = arena::open_gpu();
    if (gpu.usable) return failed("a usable GPU where none should be");
    if (gpu.code != expected)
        return failed(std::string("error ") + cudyn::to_string(gpu.code) + ", expected " + cudyn::to_string(expected));
    std::printf("no GPU (%s): running on the CPU\n", gpu.why.c_str());
    auto arena = arena::Arena::create(kMiB);
    if (arena || arena.error().code != expected) return failed("Arena::create without a GPU");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string test = argc > 1 ? argv[1] : "";
    if (test == "share-child" && argc == 3) return share_child(argv[2]);
    if (test == "stub") return without_gpu(cudyn::ErrorCode::StubDriver);
    if (test == "no-driver") return without_gpu(cudyn::ErrorCode::DriverNotFound);
    const arena::Gpu gpu = arena::open_gpu();
    if (!gpu.usable) return failed("no GPU: " + gpu.why);
    if (test == "memory") return memory();
    if (test == "growth") return growth(true);
    if (test == "old-driver") return growth(false);
    if (test == "share") return share();
    if (test == "fault") return fault();
    return failed("unknown test '" + test + "' (memory, growth, old-driver, share, fault, stub, no-driver)");
}
