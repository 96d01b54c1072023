// cudyn — Stream: owned streams and the default-stream handles.
#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "device/internal.hpp"

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

Result<void> Stream::Held::release() {
    return context.release_into([this] { return call_driver(&DriverTable::cuStreamDestroy_v4000, stream); },
                                [this] { *this = Held{}; });
}

}  // namespace cudyn
