// Owner<Buffer>: a Python memory object that owns one cudyn owner (a buffer,
// an import, a growable range). close() releases it with the GIL released
// and raises what the driver reported; garbage collection releases it
// silently (the C++ owner's destructor).
#pragma once

#include "errors.hpp"
#include "memory_object.hpp"

#include <string>
#include <utility>

namespace cudyn_python {

// How an owner lets go: free() by default; specialized where the C++ class
// spells it otherwise (before the Owner using it is instantiated).
template <typename Buffer>
struct Release {
    static cudyn::Result<void> run(Buffer& buffer) { return buffer.free(); }
};

template <typename Buffer>
class Owner : public Memory {
public:
    Owner(Buffer buffer, const char* name) : buffer_(std::move(buffer)), name_(name) {}

    const char* kind_name() const noexcept override { return name_; }
    bool closed() const noexcept override { return buffer_.empty(); }
    void close() override {
        if (buffer_.empty()) return;
        require_no_exports((std::string(name_) + ".close").c_str());
        cudyn::Result<void> result = cudyn::ok();
        {
            py::gil_scoped_release unlocked;  // a release waits for the device
            result = Release<Buffer>::run(buffer_);
        }
        unwrap(std::move(result));
    }
    const Buffer& buffer() const noexcept { return buffer_; }
    Buffer& buffer() noexcept { return buffer_; }
    void require_open(const char* operation) const {
        if (buffer_.empty()) raise_invalid(std::string(operation) + ": the " + name_ + " was closed");
    }

protected:
    Buffer buffer_;
    const char* name_;
};

// Runs a cudyn call with the GIL released and raises its error.
template <typename Call>
auto call_unlocked(Call call) {
    auto result = [&] {
        py::gil_scoped_release unlocked;
        return call();
    }();
    return unwrap(std::move(result));
}

// The ordinal of the device an allocation belongs to (DLPack's device id).
int owning_device(CUdeviceptr address);

// owning_device, asked once and only when needed (a DLPack or array-interface
// export, a copy): an allocation that is only made and freed pays nothing.
class LazyDevice {
public:
    int of(CUdeviceptr address) const {
        if (ordinal_ < 0) ordinal_ = owning_device(address);
        return ordinal_;
    }

private:
    mutable int ordinal_ = -1;
};

// A memory description of device memory (kDLCUDA) on `device`.
MemoryDescription device_memory(CUdeviceptr address, std::size_t nbytes, int device);

}  // namespace cudyn_python
