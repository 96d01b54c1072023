// arena — the GPU part of a small downstream program, written the way a user
// of cudyn writes it: device memory that grows in place (VMM) where the driver
// can, by reallocating where it cannot, and whose bytes another process can
// open. Its tests (arena_tests.cpp) run on cudyn's installed fake drivers, on
// a machine with no GPU.
#pragma once

#include <cudyn/cudyn.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace arena {

// The GPU as the program found it: usable, or why not (the program then runs
// without it instead of failing).
struct Gpu {
    bool usable = false;
    cudyn::ErrorCode code = cudyn::ErrorCode::Driver;  // why not, when not usable
    std::string why;
};

// Loads the driver and makes device 0's primary context current on this
// thread for the rest of the process.
Gpu open_gpu();

class Arena {
public:
    // Up to `capacity` bytes of device memory, none of it mapped yet.
    static cudyn::Result<Arena> create(std::size_t capacity);

    // At least `bytes` usable, the bytes already written kept. In place (the
    // address stays) where the driver has VMM; otherwise a new allocation and
    // a copy. On failure the arena keeps its size and bytes.
    cudyn::Result<void> grow_to(std::size_t bytes);
    cudyn::Result<void> write(std::size_t offset, const std::vector<std::uint8_t>& bytes);
    cudyn::Result<std::vector<std::uint8_t>> read(std::size_t offset, std::size_t count) const;

    std::size_t size() const noexcept;
    CUdeviceptr address() const noexcept;
    bool grows_in_place() const noexcept { return in_place_.has_value(); }

private:
    cudyn::DeviceSpan<std::uint8_t> bytes() const noexcept;

    std::size_t capacity_ = 0;
    std::optional<cudyn::GrowableBuffer> in_place_;  // VMM
    cudyn::DeviceBuffer<std::uint8_t> moved_;        // without VMM
};

// Sharing between processes: `count` bytes of device memory exported as text
// (a legacy IPC descriptor in hex) that another process passes to open_shared.
struct SharedBlock {
    cudyn::DeviceBuffer<std::uint8_t> memory;
    std::string descriptor;
};
cudyn::Result<SharedBlock> share_block(std::size_t count);
cudyn::Result<cudyn::ImportedIpcMemory> open_shared(const std::string& descriptor);

}  // namespace arena
