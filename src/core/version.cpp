#include "cudyn/core/version.hpp"

namespace cudyn {

const char* library_version() noexcept { return CUDYN_VERSION_STRING; }

}  // namespace cudyn
