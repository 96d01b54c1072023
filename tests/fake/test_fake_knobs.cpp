// The fake driver's own knobs, swept with bad values ([fault-sweep], emulated
// fake): every FAKECUDA_* variable and fakecuda_set_fail take user text, and
// the fake is installed for other programs' tests, so a bad value must give a
// line on stderr naming the variable or rule and what was wrong, the default
// (or the nearest valid value) in its place, and never a crash. Each case is a
// fresh process (the variables are read when the fake loads): this binary
// again, as the child role below, its output gathered in a file.
#include "support/catch.hpp"
#include "support/child_process.hpp"

#include "cudyn/fake/fakecuda_probe.h"

#include "cudyn/loader/driver_call.hpp"
#include "cudyn/loader/loader.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// The child: loads the driver, applies a run-time fault spec when given one,
// and prints what it found.
int knob_child(int argc, char** argv) {
    const cudyn::LoadReport& report = cudyn::load_report();
    int count = -1;
    if (report.state == cudyn::LoadState::Loaded)
        (void)cudyn::call_driver(&cudyn::DriverTable::cuDeviceGetCount_v2000, &count);
    if (argc >= 1) {
        void* driver = dlopen(report.library_path.c_str(), RTLD_NOLOAD | RTLD_NOW);
        auto set_fail = driver ? reinterpret_cast<PFN_fakecuda_set_fail>(dlsym(driver, "fakecuda_set_fail")) : nullptr;
        if (set_fail == nullptr) return 3;
        set_fail(argv[0]);
        set_fail(nullptr);  // a null spec clears, as "" does
    }
    std::printf("state %s devices %d\n", cudyn::to_string(report.state), count);
    return 0;
}
const cudyn_test::ChildRole knob_child_role("fake-knob", knob_child);

struct ChildOutput {
    int status = -1;  // exit status; -1: killed by a signal or not started
    std::string text;  // stdout and stderr
};

// This binary as `fake-knob [spec]` with `variable=value` in its environment.
ChildOutput run_child(const std::string& variable, const std::string& value, const std::vector<std::string>& args) {
    char path[] = "/tmp/cudyn-fake-knob-XXXXXX";
    const int out = mkstemp(path);
    REQUIRE(out >= 0);
    std::vector<std::string> words = {"/proc/self/exe", cudyn_test::kChildFlag, "fake-knob"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry)
        if (std::string(*entry).rfind(variable + "=", 0) != 0) environment.emplace_back(*entry);
    environment.push_back(variable + "=" + value);
    std::vector<char*> envp;
    for (std::string& entry : environment) envp.push_back(entry.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out, 1);
    posix_spawn_file_actions_adddup2(&actions, out, 2);
    pid_t pid = 0;
    ChildOutput result;
    if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data()) == 0) {
        int status = 0;
        if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) result.status = WEXITSTATUS(status);
    }
    posix_spawn_file_actions_destroy(&actions);
    close(out);
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    result.text = text.str();
    unlink(path);
    return result;
}

struct KnobCase {
    const char* variable;
    std::string value;
    const char* said;  // what stderr must contain
    int devices;       // what cuDeviceGetCount must answer; -1: not checked
};

}  // namespace

TEST_CASE("the fake's knobs: a bad value is said on stderr and replaced, never a crash",
          "[emulated][fault-sweep]") {
    const std::vector<KnobCase> cases = {
        {"FAKECUDA_DEVICES", "two", "FAKECUDA_DEVICES='two' is not a number; using 1", 1},
        {"FAKECUDA_DEVICES", "99", "FAKECUDA_DEVICES='99' is outside 0..8; using 8", 8},
        {"FAKECUDA_DEVICES", "-3", "FAKECUDA_DEVICES='-3' is outside 0..8; using 0", -1},
        {"FAKECUDA_DEVICES", "123456789012345678901234567890", "is outside 0..8; using 8", 8},
        {"FAKECUDA_DEVICES", "2x", "FAKECUDA_DEVICES='2x' is not a number", 1},
        {"FAKECUDA_NUMA_NODES", "0", "FAKECUDA_NUMA_NODES='0' is outside 1..64; using 1", 2},
        {"FAKECUDA_IMEX", "yes", "FAKECUDA_IMEX='yes' is not a number; using 0", 2},
        {"FAKECUDA_IMEX", "2", "FAKECUDA_IMEX='2' is outside 0..1; using 1", 2},
        {"FAKECUDA_DRIVER_VERSION", "13.0", "FAKECUDA_DRIVER_VERSION='13.0' is not a number", 2},
        {"FAKECUDA_STREAM_DELAY_US", "-1", "FAKECUDA_STREAM_DELAY_US='-1' is outside", 2},
        {"FAKECUDA_ATTR", "89", "FAKECUDA_ATTR: cannot parse '89'", 2},
        {"FAKECUDA_ATTR", "89:", "FAKECUDA_ATTR: missing value", 2},
        {"FAKECUDA_ATTR", "managed:0", "FAKECUDA_ATTR: cannot parse 'managed:0'", 2},
        {"FAKECUDA_ATTR", "89:0@7", "FAKECUDA_ATTR: bad device near '@7' (devices 0..1)", 2},
        {"FAKECUDA_ATTR", "99999:1", "FAKECUDA_ATTR: attribute 99999 out of range", 2},
        {"FAKECUDA_ATTR", "89:99999999999", "does not fit an int", 2},
        {"FAKECUDA_NO_PEER", "0", "FAKECUDA_NO_PEER: bad pair near '0'", 2},
        {"FAKECUDA_NO_PEER", "0:1,1:9", "FAKECUDA_NO_PEER: bad pair near '1:9' (A:B, devices 0..1)", 2},
        {"FAKECUDA_NO_PEER", "0:x", "FAKECUDA_NO_PEER: bad pair near '0:x'", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:0", "fault rule 'cuMemAlloc:0' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:x", "fault rule 'cuMemAlloc:x' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:-1+", "fault rule 'cuMemAlloc:-1+' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:1:NOT_A_CODE", "fault rule 'cuMemAlloc:1:NOT_A_CODE' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:1:", "fault rule 'cuMemAlloc:1:' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:1:SLOW=0", "ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc:1:SLOW=99999999999", "ignored", 2},
        {"FAKECUDA_FAIL", ":1", "fault rule ':1' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAlloc::2", "fault rule 'cuMemAlloc::2' ignored", 2},
        {"FAKECUDA_FAIL", "cuMemAloc:1", "no entry point named cuMemAloc; the rule never fires", 2},
        {"FAKECUDA_FAIL", "cuDeviceGetCount:1:2:3", "ignored", 2},
        {"FAKECUDA_FAIL", std::string(20000, 'x') + ":1", "the rule never fires", 2},
    };
    for (const KnobCase& knob : cases) {
        INFO(knob.variable << "='" << knob.value.substr(0, 60) << "'");
        const ChildOutput child = run_child(knob.variable, knob.value, {});
        INFO("child output: " << child.text.substr(0, 400));
        CHECK(child.status == 0);
        CHECK(child.text.find(knob.said) != std::string::npos);
        if (knob.devices >= 0)
            CHECK(child.text.find("devices " + std::to_string(knob.devices) + "\n") != std::string::npos);
    }
}

TEST_CASE("the fake's knobs: fakecuda_set_fail with a bad spec says so, never a crash",
          "[emulated][fault-sweep]") {
    const std::vector<std::pair<std::string, std::string>> specs = {
        {"cuMemAlloc:0:2", "fault rule 'cuMemAlloc:0:2' ignored"},
        {",,, ,", "state loaded"},  // empty rules: nothing to say, nothing set
        {"cuMemAlloc:1:CUDA_ERROR_NOPE", "ignored"},
        {"cuNothing", "no entry point named cuNothing"},
    };
    for (const auto& [spec, said] : specs) {
        INFO("spec '" << spec << "'");
        const ChildOutput child = run_child("FAKECUDA_DEVICES", "1", {spec});
        INFO("child output: " << child.text);
        CHECK(child.status == 0);
        CHECK(child.text.find(said) != std::string::npos);
    }
}
