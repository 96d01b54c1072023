// The one main of every Catch2 test binary. A test that cannot run on this
// machine exits 77, Meson's skip code, so it shows as skipped, never passed:
//   CUDYN_TEST_REQUIRE_FILE=path  skip unless that file exists (the toolkit stub)
//   CUDYN_TEST_REQUIRE_GPU=1      skip unless the driver is loaded and has a device
//   CUDYN_TEST_REQUIRE_DEVICES=N  skip unless the driver is loaded and has at least N devices
//   CUDYN_TEST_REQUIRE_UID_CHANGE=1  skip unless a child can switch to uid 65534 (root with CAP_SETUID)
// `--cudyn-test-child ROLE ...` runs a child role instead (child_process.hpp).
#define CUDYN_TEST_MAIN
#include "catch.hpp"
#include "child_process.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/loader.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace {

constexpr int kSkipExitCode = 77;

#if !defined(_WIN32)
// Whether a child can become uid/gid 65534, tried in a forked child (main has
// started no thread yet, so fork is safe here).
bool can_switch_to_nobody() {
    if (::geteuid() != 0) return false;
    const pid_t child = ::fork();
    if (child < 0) return false;
    if (child == 0)
        _exit(::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0 ? 0 : 1);
    int status = 0;
    return ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
#endif

std::string skip_reason() {
    if (const char* path = std::getenv("CUDYN_TEST_REQUIRE_FILE"); path != nullptr && *path != '\0') {
        struct stat info{};
        if (::stat(path, &info) != 0) return std::string(path) + " is not present on this machine";
    }
    if (const char* gpu = std::getenv("CUDYN_TEST_REQUIRE_GPU"); gpu != nullptr && std::string(gpu) == "1") {
        if (auto status = cudyn::driver_status(); !status) return "no usable driver: " + status.error().describe();
        auto count = cudyn::Device::count();
        if (!count || *count == 0) return "the driver reports no CUDA device";
    }
    if (const char* wanted = std::getenv("CUDYN_TEST_REQUIRE_DEVICES"); wanted != nullptr && *wanted != '\0') {
        const int devices = std::atoi(wanted);
        if (auto status = cudyn::driver_status(); !status) return "no usable driver: " + status.error().describe();
        auto count = cudyn::Device::count();
        if (!count || *count < devices)
            return "needs " + std::to_string(devices) + " devices; the driver reports " +
                   std::to_string(count ? *count : 0);
    }
#if !defined(_WIN32)
    if (const char* change = std::getenv("CUDYN_TEST_REQUIRE_UID_CHANGE"); change != nullptr && std::string(change) == "1") {
        if (!can_switch_to_nobody()) return "cannot start a child as another user here (needs root with CAP_SETUID)";
    }
#endif
    return {};
}

}  // namespace

int main(int argc, char** argv) {
#if !defined(_WIN32)
    if (const int status = cudyn_test::run_child_role_if_asked(argc, argv); status >= 0) return status;
#endif
    if (const std::string reason = skip_reason(); !reason.empty()) {
        std::printf("SKIP: %s\n", reason.c_str());
        return kSkipExitCode;
    }
    Catch::Session session;
    // CUDYN_TEST_LEAVE_OUT=[tag]: the cases with that tag are left out of
    // every filter given (a stage that runs the suite where those cases
    // cannot run, e.g. the driver's checkpoint under compute-sanitizer).
    std::vector<std::string> arguments(argv, argv + argc);
    if (const char* tag = std::getenv("CUDYN_TEST_LEAVE_OUT"); tag != nullptr && *tag != '\0')
        for (std::size_t i = 1; i < arguments.size(); ++i) {
            if (arguments[i].empty() || arguments[i][0] != '[') continue;  // options and names stay
            std::string filter;  // every alternative of "[a][b],[c]" gets the exclusion
            for (char c : arguments[i] + ",") {
                if (c == ',') filter += std::string("~") + tag;
                filter += c;
            }
            filter.pop_back();
            arguments[i] = filter;
        }
    std::vector<char*> pointers;
    for (std::string& argument : arguments) pointers.push_back(argument.data());
    if (const int status = session.applyCommandLine(static_cast<int>(pointers.size()), pointers.data()); status != 0)
        return status;
    // Each Meson test runs one topic filter: a filter that matches no test
    // case is a broken suite (a tag misspelt, a file left out of the build),
    // not a pass. Catch2 3.x fails such a run by itself; 2.x needs asking.
#if defined(CATCH_VERSION_MAJOR) && CATCH_VERSION_MAJOR < 3
    session.configData().warnings =
        static_cast<Catch::WarnAbout::What>(session.configData().warnings | Catch::WarnAbout::NoTests);
#endif
    return session.run();
}
