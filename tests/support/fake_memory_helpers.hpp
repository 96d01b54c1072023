// Helpers shared by the fake-driver memory suites (test_fake_memory.cpp,
// test_fake_managed.cpp, test_fake_device_span.cpp): a current context,
// device words read raw, error checks, leak accounting.
#pragma once

#include "catch.hpp"
#include "fake_driver.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/core/error.hpp"
#include "cudyn/device/primary_context.hpp"

#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace cudyn_test {

// Device `ordinal`'s primary context, retained and current on this thread.
// Declare it before the buffers of a test so they are freed first.
inline cudyn::PrimaryContext activate(int ordinal) {
    auto device = cudyn::Device::get(ordinal);
    REQUIRE(device.has_value());
    auto context = cudyn::PrimaryContext::activate(*device);
    REQUIRE(context.has_value());
    return std::move(*context);
}

// n consecutive words from `first`.
inline std::vector<std::uint32_t> iota_vector(std::size_t n, std::uint32_t first) {
    std::vector<std::uint32_t> values(n);
    std::iota(values.begin(), values.end(), first);
    return values;
}

// What a kernel would read at a device address: `count` words through a raw
// cuMemcpyDtoH (not through the cudyn type under test).
inline std::vector<std::uint32_t> read_device(CUdeviceptr address, std::size_t count) {
    std::vector<std::uint32_t> values(count);
    REQUIRE(cudyn::call_driver(&cudyn::DriverTable::cuMemcpyDtoH_v3020, values.data(), address,
                               count * sizeof(std::uint32_t))
                .has_value());
    return values;
}

// The failure's code is `code` and its description mentions `mentions`.
template <typename R>
void require_error(const R& result, cudyn::ErrorCode code, const std::string& mentions) {
    REQUIRE_FALSE(result.has_value());
    const std::string description = result.error().describe();
    INFO(description);
    CHECK(result.error().code == code);
    CHECK(description.find(mentions) != std::string::npos);
}

// Counts the fake driver's live allocations and the calls of some entries at
// construction; unchanged() says nothing was allocated or called since.
class DriverSnapshot {
public:
    explicit DriverSnapshot(std::initializer_list<const char*> entries = {})
        : live_(FakeDriver::loaded().live_allocations()) {
        for (const char* entry : entries) calls_.emplace_back(entry, FakeDriver::loaded().call_count(entry));
    }
    long live_delta() const { return FakeDriver::loaded().live_allocations() - live_; }
    long calls_since(const char* entry) const {
        for (const auto& [name, count] : calls_)
            if (name == entry) return FakeDriver::loaded().call_count(entry) - count;
        return FakeDriver::loaded().call_count(entry);
    }
    // No live allocation was added and none of the entries was called.
    void require_untouched() const {
        CHECK(live_delta() == 0);
        for (const auto& [name, count] : calls_) {
            INFO(name);
            CHECK(FakeDriver::loaded().call_count(name.c_str()) == count);
        }
    }

private:
    long live_;
    std::vector<std::pair<std::string, long>> calls_;
};

}  // namespace cudyn_test
