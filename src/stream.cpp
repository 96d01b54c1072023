// cudyn — Stream: owned streams and the default-stream handles.
#include "cudyn/stream.hpp"
#include "cudyn/driver_call.hpp"
#include "completion.hpp"

#include <utility>

namespace cudyn {

Result<Stream> Stream::create(bool blocking) {
    CUDYN_TRY_ASSIGN(auto context, detail::OwnerContext::current());
    CUstream stream = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuStreamCreate_v2000, &stream,
                          blocking ? unsigned{CU_STREAM_DEFAULT} : unsigned{CU_STREAM_NON_BLOCKING}));
    return Stream(stream, std::move(context));
}

Result<void> Stream::synchronize() const {
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, handle());
}

Result<bool> Stream::query() const {
    return detail::completion(call_driver(&DriverTable::cuStreamQuery_v2000, handle()));
}

Result<void> Stream::Traits::release(State& state) {
    CUDYN_TRY(state.context.release_into(
        [&state] { return call_driver(&DriverTable::cuStreamDestroy_v4000, state.stream); }));
    state = State{};
    return ok();
}

}  // namespace cudyn
