// NCCL through cudyn against the fake NCCL (tests/fakenccl): the load report,
// communicators, registration as an owner (every teardown order), the
// registered GrowableBuffer following growth, shrinking, release and restore,
// symmetric windows, errors on demand, and two ranks as two processes that
// meet over an FdChannel, all-reduce and broadcast over registered memory
// that grows between collectives. An NCCL without windows, and no NCCL.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/nccl_rank_scenario.hpp"
#include "support/scoped_knob.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/nccl/communicator.hpp"
#include "cudyn/nccl/nccl_channel.hpp"
#include "cudyn/nccl/nccl_library.hpp"
#include "cudyn/nccl/nccl_memory.hpp"
#include "cudyn/nccl/registered_growable_buffer.hpp"
#include "cudyn/nccl/registered_memory.hpp"

#include "nccl/internal.hpp"  // wheel_candidates

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using cudyn::ErrorCode;
using cudyn_test::activate;
using cudyn_test::require_error;
using cudyn_test::require_ok;
using cudyn_test::take;

// The fake NCCL's probe, from the library cudyn opened (CUDYN_NCCL_PATH).
long probe(const char* name) {
    void* library = ::dlopen(std::getenv("CUDYN_NCCL_PATH"), RTLD_NOLOAD | RTLD_LAZY);
    auto* function = library != nullptr ? reinterpret_cast<long (*)()>(::dlsym(library, name)) : nullptr;
    return function != nullptr ? function() : -1;
}
long live_registrations() { return probe("fakenccl_live_registrations"); }
long stale_deregistrations() { return probe("fakenccl_stale_deregistrations"); }
long dropped_registrations() { return probe("fakenccl_dropped_registrations"); }

using cudyn_test::ScopedKnob;

// A communicator of one rank: enough for everything but the exchange.
cudyn::NcclCommunicator solo() {
    auto id = take(cudyn::NcclUniqueId::create());
    return take(cudyn::NcclCommunicator::init_rank(id, 1, 0));
}

template <typename T>
std::vector<T> read_back(cudyn::DeviceSpan<T> span) {
    std::vector<T> values(span.size());
    require_ok(span.copy_to(cudyn::HostSpan<T>(values)));
    return values;
}

}  // namespace

TEST_CASE("NCCL loads from CUDYN_NCCL_PATH with every entry", "[emulated][nccl]") {
    const cudyn::NcclReport& report = cudyn::nccl_report();
    INFO(report.message);
    REQUIRE(report.state == cudyn::NcclState::Loaded);
    CHECK(report.version == 22803);
    CHECK(report.missing_entries.empty());
    REQUIRE(report.tried.size() == 1);
    CHECK(report.tried[0] == std::getenv("CUDYN_NCCL_PATH"));
    CHECK(report.library_path.find("libnccl.so.2") != std::string::npos);
}

TEST_CASE("communicator arguments and NCCL's errors", "[emulated][nccl]") {
    auto context = activate(0);
    auto id = take(cudyn::NcclUniqueId::create());
    require_error(cudyn::NcclCommunicator::init_rank(id, 0, 0), ErrorCode::InvalidArgument, "rank_count");
    require_error(cudyn::NcclCommunicator::init_rank(id, 2, 2), ErrorCode::InvalidArgument, "rank 2 is outside");
    cudyn::NcclCommunicator comm = take(cudyn::NcclCommunicator::init_rank(id, 1, 0));
    CHECK(comm.rank() == 0);
    CHECK(comm.rank_count() == 1);
    auto a = take(cudyn::DeviceBuffer<float>::allocate(16));
    auto b = take(cudyn::DeviceBuffer<float>::allocate(8));
    require_error(comm.all_reduce<float>(a.device_span(), b.device_span(), cudyn::NcclReduction::Sum),
                  ErrorCode::InvalidArgument, "send has 16 elements, receive 8");
    require_error(comm.broadcast(a.device_span(), 1), ErrorCode::InvalidArgument, "root 1");
    {
        ScopedKnob failing("FAKENCCL_FAIL", "ncclAllReduce");
        require_error(comm.all_reduce<float>(a.device_span(), a.device_span(), cudyn::NcclReduction::Sum),
                      ErrorCode::Driver, "NcclCommunicator::all_reduce: ncclAllReduce answered ncclResult_t 3 (internal error): FAKENCCL_FAIL");
    }
    require_ok(comm.finalize());
    require_ok(comm.destroy());
    CHECK(comm.empty());
    require_error(comm.broadcast(a.device_span(), 0), ErrorCode::InvalidArgument, "communicator is empty");
}

TEST_CASE("registered memory is deregistered before it goes, whatever the order", "[emulated][nccl]") {
    auto context = activate(0);
    const long stale_before = stale_deregistrations();
    const long dropped_before = dropped_registrations();
    SECTION("the registered memory goes first, then the communicator") {
        auto comm = solo();
        {
            auto registered = take(cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<int>>::create(
                comm, take(cudyn::DeviceBuffer<int>::allocate(256))));
            CHECK(registered.registered());
            CHECK(live_registrations() == 1);
        }
        CHECK(live_registrations() == 0);
    }
    SECTION("the communicator goes first: it lives on until the registration is gone") {
        auto registered = [] {
            auto comm = solo();
            return take(cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<int>>::create(
                comm, take(cudyn::DeviceBuffer<int>::allocate(256))));
        }();
        CHECK(live_registrations() == 1);
        registered = {};  // move-assigning an empty one: deregistration, the memory, then the communicator
        CHECK(live_registrations() == 0);
    }
    SECTION("deregister() hands the memory back, unregistered and usable") {
        auto comm = solo();
        auto registered = take(cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<int>>::create(
            comm, take(cudyn::DeviceBuffer<int>::allocate(64))));
        auto buffer = take(registered.deregister());
        CHECK(live_registrations() == 0);
        CHECK_FALSE(registered.registered());
        require_ok(buffer.fill(7));
        CHECK(read_back(buffer.device_span())[63] == 7);
    }
    SECTION("a refused registration releases the memory with the error") {
        auto comm = solo();
        ScopedKnob failing("FAKENCCL_FAIL", "ncclCommRegister");
        const long live_allocations = cudyn_test::FakeDriver::loaded().live_allocations();
        require_error(cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<int>>::create(
                          comm, take(cudyn::DeviceBuffer<int>::allocate(64))),
                      ErrorCode::Driver, "NcclRegisteredMemory::create: ncclCommRegister answered");
        CHECK(cudyn_test::FakeDriver::loaded().live_allocations() == live_allocations);
    }
    CHECK(stale_deregistrations() == stale_before);
    CHECK(dropped_registrations() == dropped_before);
}

TEST_CASE("a registered GrowableBuffer stays registered chunk by chunk", "[emulated][nccl]") {
    auto context = activate(0);
    const long stale_before = stale_deregistrations();
    auto comm = solo();
    auto buffer = take(cudyn::create_nccl_growable_buffer(0, std::size_t{64} << 20));
    const std::size_t chunk = buffer.chunk_size_bytes();
    require_ok(buffer.grow_to(chunk));
    CHECK(cudyn::includes(buffer.properties().handle_types(), cudyn::HandleType::PosixFileDescriptor));
    auto registered = take(cudyn::NcclRegisteredGrowableBuffer::create(comm, std::move(buffer)));
    CHECK(registered.registered_chunks() == 1);
    CHECK(live_registrations() == 1);

    require_ok(registered.grow_to(3 * chunk));
    CHECK(registered.registered_chunks() == 3);
    CHECK(live_registrations() == 3);
    auto words = take(registered.buffer().device_span_as<std::int32_t>());
    require_ok(words.fill(5));
    {
        // The fake refuses collectives on memory not wholly registered: the grown buffer passes,
        // an unregistered buffer does not.
        ScopedKnob strict("FAKENCCL_REQUIRE_REGISTERED", "1");
        require_ok(comm.all_reduce<std::int32_t>(words, words, cudyn::NcclReduction::Sum));
        auto loose = take(cudyn::DeviceBuffer<std::int32_t>::allocate(16));
        require_error(comm.all_reduce<std::int32_t>(loose.device_span(), loose.device_span(), cudyn::NcclReduction::Sum),
                      ErrorCode::Driver, "not wholly registered");
    }
    CHECK(read_back(words).back() == 5);

    SECTION("a refused registration while growing leaves the previous size, registered") {
        ScopedKnob failing("FAKENCCL_FAIL", "ncclCommRegister");
        require_error(registered.grow_to(5 * chunk), ErrorCode::Driver, "NcclRegisteredGrowableBuffer::grow_to");
        CHECK(registered.buffer().size_bytes() == 3 * chunk);
        CHECK(registered.registered_chunks() == 3);
        CHECK(live_registrations() == 3);
    }
    SECTION("shrinking deregisters the chunks that go before they are unmapped") {
        require_ok(registered.shrink_to(chunk + 1));
        CHECK(registered.buffer().size_bytes() == 2 * chunk);
        CHECK(registered.registered_chunks() == 2);
        CHECK(live_registrations() == 2);
        ScopedKnob strict("FAKENCCL_REQUIRE_REGISTERED", "1");
        require_ok(comm.broadcast(take(registered.buffer().device_span_as<std::int32_t>()), 0));
        require_ok(registered.grow_to(4 * chunk));  // grown again: still wholly registered
        require_ok(comm.broadcast(take(registered.buffer().device_span_as<std::int32_t>()), 0));
    }
    SECTION("a refused deregistration stops the shrink with nothing unmapped") {
        ScopedKnob failing("FAKENCCL_FAIL", "ncclCommDeregister");
        require_error(registered.shrink_to(0), ErrorCode::Driver, "3 chunk(s) stay registered");
        CHECK(registered.buffer().size_bytes() == 3 * chunk);
    }
    SECTION("release and restore deregister and register again") {
        require_ok(registered.release_physical(cudyn::GrowableBuffer::Contents::Save));
        CHECK(registered.registered_chunks() == 0);
        CHECK(live_registrations() == 0);
        require_ok(registered.restore());
        CHECK(registered.registered_chunks() == 3);
        CHECK(live_registrations() == 3);
        CHECK(read_back(take(registered.buffer().device_span_as<std::int32_t>())).front() == 5);
    }
    SECTION("deregister() hands the buffer back with its bytes") {
        auto back = take(registered.deregister());
        CHECK(live_registrations() == 0);
        CHECK(back.size_bytes() == 3 * chunk);
    }
    SECTION("symmetric windows, chunk by chunk") {
        auto windows = take(cudyn::NcclRegisteredGrowableBuffer::create(
            comm, take(registered.deregister()), cudyn::NcclRegistrationKind::SymmetricWindow));
        CHECK(windows.registered_chunks() == 3);
        require_ok(windows.grow_to(4 * chunk));
        CHECK(live_registrations() == 4);
    }
    registered = {};
    CHECK(live_registrations() == 0);
    CHECK(stale_deregistrations() == stale_before);
}

// ---- two ranks, two processes ------------------------------------------------------------------

namespace {

int peer_rank_role(int, char**) {
    const auto outcome = cudyn_test::run_peer_rank(cudyn::kDefaultChannelTimeout, cudyn_test::nccl_rank_scenario);
    if (outcome.setup_failure != 0) return outcome.setup_failure;
    int failures = outcome.failed_checks;
    if (stale_deregistrations() != 0 || live_registrations() != 0 || dropped_registrations() != 0) ++failures;
    return failures == 0 ? 0 : 1;
}
const cudyn_test::ChildRole peer_rank("nccl-peer-rank", peer_rank_role);

}  // namespace

TEST_CASE("two ranks meet over an FdChannel and reduce and broadcast registered memory as it grows",
          "[emulated][nccl]") {
    auto context = activate(0);
    auto peer = cudyn_test::ipc::start_child("nccl-peer-rank");
    {
        auto comm = take(cudyn::nccl_communicator_as_root({&peer.channel}));
        CHECK(comm.rank_count() == 2);
        CHECK(cudyn_test::nccl_rank_scenario(comm) == 0);
    }
    CHECK(peer.child.wait(std::chrono::seconds(60)) == 0);
    CHECK(live_registrations() == 0);
    CHECK(dropped_registrations() == 0);
}

TEST_CASE("an NCCL before 2.27: no windows, registration still works", "[emulated][nccl-old]") {
    auto context = activate(0);
    const cudyn::NcclReport& report = cudyn::nccl_report();
    REQUIRE(report.state == cudyn::NcclState::Loaded);
    CHECK(report.version == 21903);
    CHECK(report.missing_entries == std::vector<std::string>{"ncclCommWindowRegister", "ncclCommWindowDeregister"});
    auto comm = solo();
    require_error(cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<int>>::create(
                      comm, take(cudyn::DeviceBuffer<int>::allocate(64)), cudyn::NcclRegistrationKind::SymmetricWindow),
                  ErrorCode::NotSupported, "has no ncclCommWindowRegister (NCCL 2.27 brought it)");
    auto registered = take(cudyn::NcclRegisteredMemory<cudyn::DeviceBuffer<int>>::create(
        comm, take(cudyn::DeviceBuffer<int>::allocate(64))));
    CHECK(live_registrations() == 1);
}

TEST_CASE("no NCCL: every call answers NCCL's absence, the rest of cudyn works", "[emulated][nccl-missing]") {
    auto context = activate(0);
    const cudyn::NcclReport& report = cudyn::nccl_report();
    CHECK(report.state == cudyn::NcclState::NotFound);
    CHECK(report.message.find("could not open /nonexistent/cudyn-test/libnccl.so.2") != std::string::npos);
    require_error(cudyn::NcclUniqueId::create(), ErrorCode::DriverNotFound, "NcclUniqueId::create: NCCL is not usable");
    require_error(cudyn::nccl_status(), ErrorCode::DriverNotFound, "NCCL is not usable");
    auto buffer = take(cudyn::create_nccl_growable_buffer(0, std::size_t{8} << 20, 1));
    CHECK(buffer.chunk_count() == 1);
}

TEST_CASE("without CUDYN_NCCL_PATH, the nvidia-nccl wheel is looked for under Python package folders",
          "[emulated][nccl-wheel]") {
    // Package folders laid out as the wheel installs: <site>/nvidia/nccl/lib/libnccl.so.2,
    // named by PYTHONPATH, by a virtual environment, and by a Python prefix's bin on PATH.
    const char* fake = std::getenv("CUDYN_TEST_FAKE_NCCL");
    REQUIRE(fake != nullptr);
    REQUIRE(std::getenv("CUDYN_NCCL_PATH") == nullptr);
    char root[] = "/tmp/cudyn-nccl-site-XXXXXX";
    REQUIRE(::mkdtemp(root) != nullptr);
    const std::string base = root;
    const std::string wheel = "/nvidia/nccl/lib/libnccl.so.2";
    const std::string site = base + "/site", venv = base + "/venv/lib/python3.11/site-packages",
                      prefix = base + "/prefix/lib/python3.12/site-packages";
    for (const std::string& folder : {site, venv, prefix})
        REQUIRE(std::system(("mkdir -p " + folder + "/nvidia/nccl/lib").c_str()) == 0);
    REQUIRE(::symlink(fake, (site + wheel).c_str()) == 0);
    REQUIRE(std::system(("mkdir -p " + base + "/prefix/bin").c_str()) == 0);
    ScopedKnob python_path("PYTHONPATH", ("/nonexistent/cudyn-test:relative/folder:" + site).c_str());
    ScopedKnob virtual_env("VIRTUAL_ENV", (base + "/venv").c_str());
    const std::string path = std::string(std::getenv("PATH")) + ":" + base + "/prefix/bin";
    ScopedKnob search_path("PATH", path.c_str());
    const std::vector<std::string> candidates = cudyn::nccl::wheel_candidates();
    REQUIRE(candidates.size() >= 4);
    CHECK(candidates[0] == "/nonexistent/cudyn-test" + wheel);  // PYTHONPATH first, relative entries ignored
    CHECK(candidates[1] == site + wheel);
    CHECK(candidates[2] == venv + wheel);                        // then the virtual environment
    CHECK(std::find(candidates.begin(), candidates.end(), prefix + wheel) != candidates.end());
    // The report tries the system's search first, then these, and opens the first that loads:
    // the wheel here, unless this machine has a system NCCL (then that one, and nothing after it).
    const cudyn::NcclReport& report = cudyn::nccl_report();
    INFO(report.message);
    CHECK(report.state == cudyn::NcclState::Loaded);
    REQUIRE_FALSE(report.tried.empty());
    CHECK(report.tried[0] == "libnccl.so.2");
    if (report.tried.size() > 1) {
        CHECK(report.tried.size() == 3);
        CHECK(report.tried[2] == site + wheel);
        CHECK(report.library_path.find("tests/fakenccl/current/libnccl.so.2") != std::string::npos);
    }
    CHECK(std::system(("rm -rf " + base).c_str()) == 0);
}
