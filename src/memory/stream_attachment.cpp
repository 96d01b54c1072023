// cudyn — attaching managed memory to a stream.
#include "cudyn/memory/stream_attachment.hpp"

#include "core/internal.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <string>

namespace cudyn::detail {

Result<void> attach_managed_memory(CUdeviceptr base, std::size_t bytes, StreamAttachment attachment,
                                   StreamRef stream) {
    constexpr Operation kAttach{"attach_to_stream"};
    if (base == 0 || bytes == 0) return kAttach.invalid("the buffer is empty (moved from or freed)");
    switch (attachment) {
        case StreamAttachment::Global:
        case StreamAttachment::Host: break;
        case StreamAttachment::Single:
            // The legacy stream stands for every stream of the context: the
            // driver refuses a single attachment to it.
            if (stream.is_legacy_default())
                return kAttach.invalid("Single needs a stream of its own, not the legacy default stream");
            break;
        default:
            return kAttach.invalid("attachment " + std::to_string(static_cast<unsigned>(attachment)) +
                                   " is not Global, Host or Single");
    }
    // The whole allocation: the driver takes 0 or the allocation's size.
    auto called = call_driver(&DriverTable::cuStreamAttachMemAsync_v6000, stream.handle(), base, bytes,
                              static_cast<unsigned>(attachment));
    if (!called) return kAttach.context(std::move(called).error());
    return ok();
}

}  // namespace cudyn::detail
