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

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)),
      owned_(std::exchange(other.owned_, false)),
      context_(std::move(other.context_)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        if (!destroy()) forget();
        stream_ = std::exchange(other.stream_, nullptr);
        owned_ = std::exchange(other.owned_, false);
        context_ = std::move(other.context_);
    }
    return *this;
}

Stream::~Stream() {
    if (!destroy()) forget();
}

void Stream::forget() noexcept {
    stream_ = nullptr;
    owned_ = false;
    context_.reset();
}

Result<void> Stream::synchronize() const {
    return call_driver(&DriverTable::cuStreamSynchronize_v2000, stream_);
}

Result<bool> Stream::query() const {
    return detail::completion(call_driver(&DriverTable::cuStreamQuery_v2000, stream_));
}

Result<void> Stream::destroy() {
    if (!owned_) return ok();
    CUDYN_TRY(context_.release_into([this] { return call_driver(&DriverTable::cuStreamDestroy_v4000, stream_); }));
    forget();
    return ok();
}

}  // namespace cudyn
