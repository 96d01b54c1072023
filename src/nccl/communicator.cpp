// cudyn nccl — the communicator, its collectives and one registration on it.
#include "cudyn/nccl/communicator.hpp"
#include "cudyn/detail/nccl_registration.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "nccl/internal.hpp"

#include <cstring>
#include <string>

namespace cudyn {

namespace {

constexpr detail::Operation kCreateId{"NcclUniqueId::create"};
constexpr detail::Operation kInitRank{"NcclCommunicator::init_rank"};
constexpr detail::Operation kFinalize{"NcclCommunicator::finalize"};
constexpr detail::Operation kAllReduce{"NcclCommunicator::all_reduce"};
constexpr detail::Operation kBroadcast{"NcclCommunicator::broadcast"};

int nccl_reduction(NcclReduction reduction) noexcept {
    switch (reduction) {
        case NcclReduction::Sum: return nccl::kSum;
        case NcclReduction::Product: return nccl::kProd;
        case NcclReduction::Max: return nccl::kMax;
        case NcclReduction::Min: return nccl::kMin;
        case NcclReduction::Average: return nccl::kAvg;
    }
    return -1;
}

Result<const detail::NcclCommState*> live(const std::shared_ptr<detail::NcclCommState>& state,
                                          const detail::Operation& operation) {
    if (state == nullptr || state->comm == nullptr) return operation.invalid("the communicator is empty");
    return state.get();
}

// The no-stream form's wait: NCCL's work was enqueued on the default stream
// (0, NCCL's "default stream", which its runtime treats as the legacy one).
Result<void> wait_for_legacy_stream() {
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, CU_STREAM_LEGACY);
}

CUstream stream_or_legacy(CUstream stream, bool wait) noexcept { return wait ? nullptr : stream; }

}  // namespace

// ---- the unique id and the communicator --------------------------------------------------------

Result<NcclUniqueId> NcclUniqueId::create() {
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(kCreateId.name()));
    CUDYN_TRY_ASSIGN(auto get_unique_id, nccl::need(table->get_unique_id, "ncclGetUniqueId", kCreateId.name()));
    nccl::UniqueIdBytes raw{};
    CUDYN_TRY(nccl::check(get_unique_id(&raw), "ncclGetUniqueId", kCreateId.name()));
    NcclUniqueId id;
    std::memcpy(id.bytes.data(), raw.internal, kBytes);
    return id;
}

namespace detail {

NcclCommState::~NcclCommState() { (void)destroy(); }

Result<void> NcclCommState::destroy() {
    if (comm == nullptr) return ok();
    const nccl::Comm doomed = comm;
    comm = nullptr;  // never destroyed twice, even when NCCL refuses
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table("NcclCommunicator::destroy"));
    CUDYN_TRY_ASSIGN(auto destroy_comm,
                     nccl::need(table->comm_destroy, "ncclCommDestroy", "NcclCommunicator::destroy"));
    return nccl::check(destroy_comm(doomed), "ncclCommDestroy", "NcclCommunicator::destroy");
}

}  // namespace detail

Result<NcclCommunicator> NcclCommunicator::init_rank(const NcclUniqueId& id, int rank_count, int rank) {
    if (rank_count < 1) return kInitRank.invalid("rank_count must be at least 1, not " + std::to_string(rank_count));
    if (rank < 0 || rank >= rank_count)
        return kInitRank.invalid("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(rank_count) +
                                 ")");
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(kInitRank.name()));
    CUDYN_TRY_ASSIGN(auto init, nccl::need(table->comm_init_rank, "ncclCommInitRank", kInitRank.name()));
    CUDYN_TRY(nccl::need(table->comm_destroy, "ncclCommDestroy", kInitRank.name()));
    nccl::UniqueIdBytes raw{};
    std::memcpy(raw.internal, id.bytes.data(), NcclUniqueId::kBytes);
    auto state = std::make_shared<detail::NcclCommState>();
    CUDYN_TRY(nccl::check(init(&state->comm, rank_count, raw, rank), "ncclCommInitRank", kInitRank.name()));
    state->rank = rank;
    state->rank_count = rank_count;
    return NcclCommunicator(std::move(state));
}

int NcclCommunicator::rank() const noexcept { return state_ != nullptr ? state_->rank : -1; }
int NcclCommunicator::rank_count() const noexcept { return state_ != nullptr ? state_->rank_count : 0; }
void* NcclCommunicator::native_handle() const noexcept { return state_ != nullptr ? state_->comm : nullptr; }

Result<void> NcclCommunicator::finalize() {
    CUDYN_TRY_ASSIGN(const detail::NcclCommState* state, live(state_, kFinalize));
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(kFinalize.name()));
    CUDYN_TRY_ASSIGN(auto finalize_comm, nccl::need(table->comm_finalize, "ncclCommFinalize", kFinalize.name()));
    return nccl::check(finalize_comm(state->comm), "ncclCommFinalize", kFinalize.name(), state->comm);
}

Result<void> NcclCommunicator::destroy() {
    std::shared_ptr<detail::NcclCommState> state = std::move(state_);
    if (state == nullptr || state.use_count() > 1) return ok();  // registrations hold it still
    return state->destroy();
}

Result<void> NcclCommunicator::all_reduce_bytes(CUdeviceptr send, std::size_t send_count, CUdeviceptr receive,
                                                std::size_t receive_count, int type, NcclReduction reduction,
                                                CUstream stream, bool wait) {
    CUDYN_TRY_ASSIGN(const detail::NcclCommState* state, live(state_, kAllReduce));
    if (send_count != receive_count)
        return kAllReduce.invalid("send has " + std::to_string(send_count) + " elements, receive " +
                                  std::to_string(receive_count));
    if (send_count == 0) return kAllReduce.invalid("the spans are empty");
    const int op = nccl_reduction(reduction);
    if (op < 0) return kAllReduce.invalid("unknown reduction");
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(kAllReduce.name()));
    CUDYN_TRY_ASSIGN(auto all_reduce, nccl::need(table->all_reduce, "ncclAllReduce", kAllReduce.name()));
    CUDYN_TRY(nccl::check(all_reduce(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(send)),
                                     reinterpret_cast<void*>(static_cast<std::uintptr_t>(receive)), send_count, type,
                                     op, state->comm, stream_or_legacy(stream, wait)),
                          "ncclAllReduce", kAllReduce.name(), state->comm));
    return wait ? wait_for_legacy_stream() : ok();
}

Result<void> NcclCommunicator::broadcast_bytes(CUdeviceptr buffer, std::size_t count, int type, int root,
                                               CUstream stream, bool wait) {
    CUDYN_TRY_ASSIGN(const detail::NcclCommState* state, live(state_, kBroadcast));
    if (count == 0) return kBroadcast.invalid("the span is empty");
    if (root < 0 || root >= state->rank_count)
        return kBroadcast.invalid("root " + std::to_string(root) + " is outside [0, " +
                                  std::to_string(state->rank_count) + ")");
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(kBroadcast.name()));
    CUDYN_TRY_ASSIGN(auto broadcast, nccl::need(table->broadcast, "ncclBroadcast", kBroadcast.name()));
    void* address = reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffer));
    CUDYN_TRY(nccl::check(broadcast(address, address, count, type, root, state->comm, stream_or_legacy(stream, wait)),
                          "ncclBroadcast", kBroadcast.name(), state->comm));
    return wait ? wait_for_legacy_stream() : ok();
}

// ---- one registration ---------------------------------------------------------------------------

namespace detail {

Result<NcclRegistration> NcclRegistration::create(const std::shared_ptr<NcclCommState>& communicator,
                                                  CUdeviceptr address, std::size_t bytes, NcclRegistrationKind kind,
                                                  const char* operation) {
    const Operation op{operation};
    if (communicator == nullptr || communicator->comm == nullptr) return op.invalid("the communicator is empty");
    if (address == 0 || bytes == 0) return op.invalid("the memory is empty");
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(operation));
    Held held;
    held.address = address;
    held.bytes = bytes;
    held.kind = kind;
    void* base = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
    if (kind == NcclRegistrationKind::SymmetricWindow) {
        CUDYN_TRY_ASSIGN(auto window_register,
                         nccl::need(table->comm_window_register, "ncclCommWindowRegister", operation));
        CUDYN_TRY(nccl::need(table->comm_window_deregister, "ncclCommWindowDeregister", operation));
        nccl::Window window = nullptr;
        CUDYN_TRY(nccl::check(window_register(communicator->comm, base, bytes, &window, nccl::kWinCollSymmetric),
                              "ncclCommWindowRegister", operation, communicator->comm));
        held.handle = window;
    } else {
        CUDYN_TRY_ASSIGN(auto comm_register, nccl::need(table->comm_register, "ncclCommRegister", operation));
        CUDYN_TRY(nccl::need(table->comm_deregister, "ncclCommDeregister", operation));
        CUDYN_TRY(nccl::check(comm_register(communicator->comm, base, bytes, &held.handle), "ncclCommRegister",
                              operation, communicator->comm));
    }
    held.communicator = communicator;
    return NcclRegistration(std::move(held));
}

Result<void> NcclRegistration::Held::release() {
    constexpr const char* kOperation = "NcclRegistration::deregister";
    CUDYN_TRY_ASSIGN(const nccl::Table* table, nccl::usable_table(kOperation));
    if (kind == NcclRegistrationKind::SymmetricWindow) {
        CUDYN_TRY(nccl::check(table->comm_window_deregister(communicator->comm, static_cast<nccl::Window>(handle)),
                              "ncclCommWindowDeregister", kOperation, communicator->comm));
    } else {
        CUDYN_TRY(nccl::check(table->comm_deregister(communicator->comm, handle), "ncclCommDeregister", kOperation,
                              communicator->comm));
    }
    handle = nullptr;
    communicator.reset();  // the communicator may go now
    return ok();
}

}  // namespace detail

}  // namespace cudyn
