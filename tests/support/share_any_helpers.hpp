// Helpers of the share-any suites (tests/fake/test_fake_share_any.cpp,
// tests/gpu/test_gpu_share_any.cpp): the consumer that opens whatever was
// shared, the same way for every kind, and the exporter's side that fills an
// allocation, shares a part of it, and checks what the consumer wrote back.
// POSIX only (a second process, an FdChannel).
#pragma once

#include "catch.hpp"
#include "child_process.hpp"
#include "fake_memory_helpers.hpp"
#include "ipc_helpers.hpp"
#include "vmm_helpers.hpp"

#include "cudyn/loader/driver_call.hpp"
#include "cudyn/channel/fd_channel.hpp"
#include "cudyn/share/allocation_sharing.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cudyn_test::share_any {

inline constexpr std::uint32_t kFirst = 0x5A000000u;  // word i of a shared allocation holds kFirst + i
inline constexpr std::uint32_t kReply = 0x5A5A0002u;

// The consumer (a child: no Catch2 here). Receives, lets `inspect` look at
// what came, opens it without asking its kind, checks the exporter's words at
// the shared offset, writes kReply over the second half, closes, says done.
inline void consume(ChildChecks& check, cudyn::FdChannel& channel, std::chrono::milliseconds timeout,
                    const std::function<void(const cudyn::AllocationDescriptor&)>& inspect = {}) {
    using namespace cudyn_test::ipc;
    auto shared = cudyn::receive_allocation(channel, timeout);
    if (!ok(check, shared, "receive_allocation")) return;
    check.expect(!shared->exported_by_this_process(), "another process shared it");
    if (inspect) inspect(*shared);
    auto opened = cudyn::import_allocation(*shared);
    if (!ok(check, opened, std::string("import_allocation (") + cudyn::to_string(shared->kind()) + ")")) return;
    check.expect(opened->kind() == shared->kind(), "the opened kind is the shared kind");
    check.expect(opened->size_bytes() == shared->size_bytes(), "the shared size came along");
    const std::size_t bytes = opened->size_bytes();
    std::vector<std::uint32_t> words(bytes / 4);
    if (!ok(check,
            cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, words.data(), opened->device_address(), bytes),
            "read the shared part"))
        return;
    const auto first = static_cast<std::uint32_t>(shared->offset_bytes() / 4);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < words.size(); ++i) wrong += words[i] != kFirst + first + i ? 1 : 0;
    check.expect(wrong == 0, std::to_string(wrong) + " words differ from the exporter's at offset " +
                                 std::to_string(shared->offset_bytes()) + ": the address is not the exporter's");
    ok(check, set_words(opened->device_address() + bytes / 2, bytes / 2, kReply), "write the reply");
    ok(check, opened->close(), "close");
    check.expect(opened->empty(), "empty once closed");
    ok(check, send_tag(channel, kDone, timeout), "send 'done'");
}

struct Expected {
    Expected(cudyn::AllocationKind kind_, cudyn::HandleType handle_type_, std::size_t allocation_size_,
             bool exact_allocation_size_ = true)
        : kind(kind_), handle_type(handle_type_), allocation_size(allocation_size_),
          exact_allocation_size(exact_allocation_size_) {}
    cudyn::AllocationKind kind;
    cudyn::HandleType handle_type;
    std::size_t allocation_size;  // what the test allocated (or mapped): the pattern covers it
    bool exact_allocation_size;   // the driver reports exactly that size for the allocation
};

// Who consumes, and how long its steps may take.
struct Exchange {
    explicit Exchange(const char* role_) : role(role_) {}
    const char* role;
    std::vector<std::string> args;
    std::chrono::milliseconds step = cudyn_test::ipc::kStep;
    std::chrono::milliseconds child_timeout = cudyn_test::ipc::kChildTimeout;
    std::function<void(cudyn_test::ipc::ParentSide&)> before_send;  // a role's own first messages
};

// Fills [base, base + expected.allocation_size) with kFirst + i, shares
// [part, part + bytes), sends it to a consumer started as `exchange.role`,
// and checks that the consumer's reply landed in the part's second half and
// nothing else changed.
inline void share_with_consumer(CUdeviceptr base, CUdeviceptr part, std::size_t bytes, const Expected& expected,
                                const Exchange& exchange) {
    using namespace cudyn_test::ipc;
    const std::size_t words = expected.allocation_size / 4;
    const std::vector<std::uint32_t> pattern = iota_vector(words, kFirst);
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyHtoD_v3020, base, pattern.data(), words * 4));
    // From pageable memory the driver returns once the bytes are staged: the
    // other process must not read before they have landed.
    require_ok(cudyn::call_driver(&cudyn::DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY));
    const cudyn::AllocationDescriptor shared = take(cudyn::export_allocation(part, bytes));
    CHECK(shared.kind() == expected.kind);
    CHECK(shared.handle_type() == expected.handle_type);
    CHECK(shared.offset_bytes() == part - base);
    CHECK(shared.size_bytes() == bytes);
    if (expected.exact_allocation_size) CHECK(shared.allocation_size_bytes() == expected.allocation_size);
    CHECK(shared.allocation_size_bytes() >= shared.offset_bytes() + bytes);
    CHECK(shared.carries_descriptor() == (expected.handle_type == cudyn::HandleType::PosixFileDescriptor));
    CHECK(shared.exported_by_this_process());
    require_error(cudyn::import_allocation(shared), cudyn::ErrorCode::InvalidArgument, "shared by this process");

    ParentSide side = start_child(exchange.role, exchange.args);
    if (exchange.before_send) exchange.before_send(side);
    require_ok(cudyn::send_descriptor(side.channel, shared, exchange.step));
    (void)take(side.channel.receive(kDone, exchange.step));
    CHECK(side.child.wait(exchange.child_timeout) == 0);
    const std::vector<std::uint32_t> now = read_device(base, words);
    std::vector<std::uint32_t> want = pattern;
    for (std::size_t i = (part - base + bytes / 2) / 4; i < (part - base + bytes) / 4; ++i) want[i] = kReply;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < words; ++i) wrong += now[i] != want[i] ? 1 : 0;
    INFO(wrong << " words of the exporter's allocation are not the pattern with the reply in the part's second half");
    CHECK(wrong == 0);
}

}  // namespace cudyn_test::share_any
