#include "arena.hpp"

#include <cstdio>

namespace arena {

Gpu open_gpu() {
    // Kept for the process: the context stays current for every later call.
    static std::optional<cudyn::PrimaryContext> context;
    auto device = cudyn::Device::get(0);
    if (!device) return {false, device.error().code, device.error().describe()};
    auto activated = cudyn::PrimaryContext::activate(*device);
    if (!activated) return {false, activated.error().code, activated.error().describe()};
    context = std::move(*activated);
    return {true, cudyn::ErrorCode::Driver, {}};
}

cudyn::Result<Arena> Arena::create(std::size_t capacity) {
    Arena arena;
    arena.capacity_ = capacity;
    auto buffer = cudyn::GrowableBuffer::create(cudyn::AllocationProperties::device(0), capacity);
    if (buffer) {
        arena.in_place_ = std::move(*buffer);
    } else if (buffer.error().code != cudyn::ErrorCode::NotSupported) {
        return buffer.error();  // no driver, the stub, ...: nothing to fall back on
    }
    return arena;
}

cudyn::Result<void> Arena::grow_to(std::size_t bytes) {
    if (bytes > capacity_) return cudyn::Error::invalid_argument("Arena::grow_to: past the capacity");
    if (in_place_) return in_place_->grow_to(bytes);
    if (bytes <= moved_.size()) return {};
    auto larger = cudyn::DeviceBuffer<std::uint8_t>::allocate(bytes);
    if (!larger) return larger.error();
    if (!moved_.empty()) CUDYN_TRY(larger->device_span().subspan(0, moved_.size())->copy_from(moved_.device_span()));
    moved_ = std::move(*larger);
    return {};
}

cudyn::DeviceSpan<std::uint8_t> Arena::bytes() const noexcept {
    if (!in_place_) return moved_.device_span();
    auto span = in_place_->device_span_as<std::uint8_t>();
    return span ? *span : cudyn::DeviceSpan<std::uint8_t>();
}

cudyn::Result<void> Arena::write(std::size_t offset, const std::vector<std::uint8_t>& data) {
    auto part = bytes().subspan(offset, data.size());
    if (!part) return part.error();
    return part->copy_from(cudyn::HostSpan<const std::uint8_t>(data));
}

cudyn::Result<std::vector<std::uint8_t>> Arena::read(std::size_t offset, std::size_t count) const {
    auto part = bytes().subspan(offset, count);
    if (!part) return part.error();
    std::vector<std::uint8_t> data(count);
    CUDYN_TRY(part->copy_to(cudyn::HostSpan<std::uint8_t>(data)));
    return data;
}

std::size_t Arena::size() const noexcept { return in_place_ ? in_place_->size_bytes() : moved_.size(); }
CUdeviceptr Arena::address() const noexcept {
    return in_place_ ? in_place_->device_address() : moved_.device_address();
}

cudyn::Result<SharedBlock> share_block(std::size_t count) {
    auto memory = cudyn::DeviceBuffer<std::uint8_t>::allocate(count);
    if (!memory) return memory.error();
    auto descriptor = cudyn::export_ipc_memory(*memory);
    if (!descriptor) return descriptor.error();
    std::string text;
    for (std::uint8_t byte : descriptor->to_bytes()) {
        char pair[3];
        std::snprintf(pair, sizeof pair, "%02x", byte);
        text += pair;
    }
    return SharedBlock{std::move(*memory), text};
}

cudyn::Result<cudyn::ImportedIpcMemory> open_shared(const std::string& descriptor) {
    std::vector<std::uint8_t> bytes;
    for (std::size_t i = 0; i + 1 < descriptor.size(); i += 2)
        bytes.push_back(static_cast<std::uint8_t>(std::stoul(descriptor.substr(i, 2), nullptr, 16)));
    auto parsed = cudyn::IpcMemoryDescriptor::from_bytes(bytes.data(), bytes.size());
    if (!parsed) return parsed.error();
    return cudyn::import_ipc_memory(*parsed);
}

}  // namespace arena
