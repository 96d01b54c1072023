// cudyn — Stream: owned streams and the default-stream handles.
#include "cudyn/stream.hpp"
#include "cudyn/driver_call.hpp"

#include <utility>

namespace cudyn {

Result<Stream> Stream::create(bool blocking) {
    CUstream stream = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuStreamCreate_v2000, &stream,
                          blocking ? unsigned{CU_STREAM_DEFAULT} : unsigned{CU_STREAM_NON_BLOCKING}));
    return Stream(stream, true);
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), owned_(std::exchange(other.owned_, false)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        (void)destroy();
        stream_ = std::exchange(other.stream_, nullptr);
        owned_ = std::exchange(other.owned_, false);
    }
    return *this;
}

Stream::~Stream() { (void)destroy(); }

Result<void> Stream::synchronize() const {
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, stream_);
}

Result<void> Stream::destroy() {
    if (!owned_) return ok();
    owned_ = false;
    return call_driver(&DriverTable::cuStreamDestroy_v4000, std::exchange(stream_, nullptr));
}

}  // namespace cudyn
