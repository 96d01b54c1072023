// fake_transfer.hpp — what the copy and set entries share
// (fakecuda_transfers.cpp defines it; fakecuda_copy3d.cpp uses it too): what
// kind of memory an address is, when a call returns by the driver's
// synchronization rules, and one side of a transfer as the work finds it
// again when it runs.
#ifndef CUDYN_TESTS_FAKECUDA_FAKE_TRANSFER_HPP
#define CUDYN_TESTS_FAKECUDA_FAKE_TRANSFER_HPP

#include "fake_state.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fake::transfer {

// How an entry point names its copy: on a stream or not, and with the
// legacy or the per-thread default stream.
constexpr bool kNoStream = false;
constexpr bool kStream = true;
constexpr bool kLegacy = false;
constexpr bool kPerThread = true;

enum class Side { Device, Managed, Pinned, Pageable };
// When a call returns: at once, once a pageable source is staged, or when done.
enum class Returns { AtOnce, Staged, WhenDone };

// One side of a transfer as the work finds it when it runs.
struct Operand {
    enum class How {
        Device,   // a device address (resolve_device: aliases, VMM, tracked allocations)
        Unified,  // any address, as cuMemcpy infers it
        Host,     // a host pointer
        Staged,   // a copy of pageable bytes taken at the call
    } how = How::Device;
    std::uintptr_t address = 0;
    bool tracked = false;  // host memory the driver knew at the call (pinned): it must still be there
    std::shared_ptr<std::vector<unsigned char>> staged;
    // The device allocation (cuMemAlloc or pool block) the call found at the
    // address: the work must find that one, not a later one at the same
    // address (a pool reuses addresses at once), and may still use it after
    // a cuMemFreeAsync until the free's position in its stream has run.
    unsigned long long block = 0;
};

Side side_of(State& st, std::uintptr_t p);
Returns no_stream_copy(Side destination, Side source);
Returns async_copy(Side destination, Side source);
Returns no_stream_set(Side destination);

Operand device_operand(State& st, CUdeviceptr p);
Operand host_operand(State& st, const void* p, std::size_t n);  // pinned when all n bytes are in one pinned allocation
Operand unified(State& st, CUdeviceptr p);                       // the kind inferred from the address
// Where the operand's n bytes are now; nullptr when they are not there any more.
void* locate(State& st, const Operand& op, std::size_t n);
CUresult check_present(State& st, const Operand& op, std::size_t n);

// The queue of a call: its stream, or the default stream of a no-stream call.
CUresult queue_of(State& st, CUstream stream, bool per_thread_default, std::shared_ptr<Queue>* queue);
// Whether a copy batch's location hint is one the driver takes.
bool hint_valid(const State& st, const CUmemLocation& hint);
// Enqueues the work and returns when `returns` says.
CUresult submit(State& st, const std::shared_ptr<Queue>& queue, Task task, Returns returns);

}  // namespace fake::transfer

#endif
