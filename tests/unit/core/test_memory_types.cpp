// The driver-free parts of the memory modules: HostSpan, the size and range
// checks every buffer uses, flag translation, policies, and what an empty
// (never allocated) buffer answers. Runs with no driver at all.
#include "support/catch.hpp"

#include "cudyn/detail/size_checks.hpp"
#include "cudyn/memory/device_buffer.hpp"
#include "cudyn/memory/host_registration.hpp"
#include "cudyn/memory/host_span.hpp"
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/memory/migration_policy.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/memory/prefetch_plan.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace {

template <typename R>
std::string invalid_message(const R& result) {
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == cudyn::ErrorCode::InvalidArgument);
    return result.error().message;
}

}  // namespace

TEST_CASE("HostSpan views containers, arrays and pointers", "[unit]") {
    std::vector<int> values = {1, 2, 3};
    cudyn::HostSpan<int> span(values);
    CHECK(span.data() == values.data());
    CHECK(span.size() == 3);
    CHECK(span.size_bytes() == 3 * sizeof(int));
    cudyn::HostSpan<const int> view = span;
    CHECK(view.size() == 3);
    std::array<std::uint32_t, 4> array{};
    CHECK(cudyn::HostSpan<std::uint32_t>(array).size() == 4);
    double raw[5] = {};
    CHECK(cudyn::HostSpan<double>(raw).size() == 5);
    CHECK(cudyn::HostSpan<int>().empty());
    int sum = 0;
    for (int v : span) sum += v;
    CHECK(sum == 6);
    // A temporary binds only to a span of const elements, and types must match.
    static_assert(std::is_constructible_v<cudyn::HostSpan<const int>, std::vector<int>&&>);
    static_assert(!std::is_constructible_v<cudyn::HostSpan<int>, std::vector<int>&&>);
    static_assert(!std::is_constructible_v<cudyn::HostSpan<int>, const std::vector<int>&>);
    static_assert(!std::is_constructible_v<cudyn::HostSpan<int>, std::vector<long>&>);
}

TEST_CASE("size and range checks name the argument and catch overflow", "[unit]") {
    constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
    CHECK(*cudyn::detail::checked_bytes(10, 8, "count") == 80);
    CHECK(*cudyn::detail::checked_bytes(kMax / 8, 8, "count") == kMax / 8 * 8);
    CHECK(invalid_message(cudyn::detail::checked_bytes(0, 8, "things")) == "things must be non-zero");
    const std::string overflow = invalid_message(cudyn::detail::checked_bytes(kMax / 8 + 1, 8, "count"));
    CHECK(overflow.find("overflows") != std::string::npos);

    CHECK(cudyn::detail::check_range(0, 10, 10, "op").has_value());
    CHECK(cudyn::detail::check_range(9, 1, 10, "op").has_value());
    CHECK(invalid_message(cudyn::detail::check_range(9, 2, 10, "op")) == "op: offset 9 + count 2 exceeds the size 10");
    CHECK(invalid_message(cudyn::detail::check_range(kMax, 2, 10, "op")).find("exceeds") != std::string::npos);
    CHECK(invalid_message(cudyn::detail::check_range(2, kMax, 10, "op")).find("exceeds") != std::string::npos);
    CHECK(invalid_message(cudyn::detail::check_range(0, 0, 10, "op")) == "op: count must be non-zero");
}

TEST_CASE("the address-range check refuses a range that wraps around the address space", "[unit]") {
    constexpr std::uint64_t kTop = std::numeric_limits<std::uint64_t>::max();
    CHECK(cudyn::detail::check_address_range(kTop - 9, 10, "op").has_value());  // ends at the very last byte
    CHECK(cudyn::detail::check_address_range(kTop, 0, "op").has_value());       // no bytes: fine anywhere
    CHECK(invalid_message(cudyn::detail::check_address_range(kTop - 9, 11, "op")) ==
          "op: 11 bytes from address " + std::to_string(kTop - 9) +
              " run past the end of the address space (the range wraps around)");
    CHECK(*cudyn::detail::byte_size(0, 8, "count") == 0);  // byte_size alone takes a count of 0
}

TEST_CASE("bad sizes are refused before the driver is even loaded", "[unit]") {
    // The unit suite runs with no driver: these fail on their arguments, not on loading.
    CHECK(invalid_message(cudyn::DeviceBuffer<std::uint64_t>::allocate(0)).find("count") != std::string::npos);
    CHECK(invalid_message(cudyn::PinnedBuffer<std::uint64_t>::allocate(std::numeric_limits<std::size_t>::max()))
              .find("overflows") != std::string::npos);
    CHECK(invalid_message(cudyn::ManagedBuffer<char>::allocate(0)).find("count") != std::string::npos);
    CHECK(invalid_message(cudyn::HostRegistration::register_memory(nullptr, 16)).find("data") != std::string::npos);
    CHECK(invalid_message(cudyn::ManagedRange::over(0, 16)).find("base") != std::string::npos);
    cudyn::PrefetchPlan plan;
    CHECK(invalid_message(plan.execute(CUstream{nullptr})).find("empty") != std::string::npos);
}

TEST_CASE("with no driver, advice and prefetch report the loader's error", "[unit]") {
    auto range = cudyn::ManagedRange::over(0x10000, 4096);
    REQUIRE(range.has_value());
    // Not NotSupported (which would blame the driver's ABI): there is no driver.
    for (const cudyn::Location& location : {cudyn::Location::host_numa(0), cudyn::Location::device(0)}) {
        auto prefetched = range->prefetch_to(location, CUstream{nullptr});
        REQUIRE_FALSE(prefetched.has_value());
        CHECK(prefetched.error().code == cudyn::ErrorCode::DriverNotFound);
        auto advised = range->set_preferred_location(location);
        REQUIRE_FALSE(advised.has_value());
        CHECK(advised.error().code == cudyn::ErrorCode::DriverNotFound);
    }
    auto buffer = cudyn::DeviceBuffer<int>::allocate(4);
    REQUIRE_FALSE(buffer.has_value());
    CHECK(buffer.error().code == cudyn::ErrorCode::DriverNotFound);
}

TEST_CASE("empty buffers: nothing to free, every operation refused", "[unit]") {
    cudyn::DeviceBuffer<float> buffer;
    CHECK(buffer.empty());
    CHECK(buffer.device_address() == 0);
    CHECK(buffer.size() == 0);
    CHECK(buffer.free().has_value());
    std::vector<float> host(4);
    CHECK(invalid_message(buffer.copy_from(host)).find("empty") != std::string::npos);
    CHECK(invalid_message(buffer.fill(1.0f)).find("empty") != std::string::npos);
    cudyn::ManagedBuffer<int> unified;
    CHECK(unified.data() == nullptr);
    CHECK(invalid_message(unified.managed_range()).find("empty") != std::string::npos);
    cudyn::HostRegistration registration;
    CHECK(registration.host_address() == nullptr);
    CHECK(registration.unregister().has_value());
}

TEST_CASE("flags and policies translate exactly", "[unit]") {
    CHECK(cudyn::PinnedFlags{}.to_cu() == 0u);
    CHECK(cudyn::PinnedFlags{true, false, false}.to_cu() == unsigned{CU_MEMHOSTALLOC_PORTABLE});
    CHECK(cudyn::PinnedFlags{false, true, false}.to_cu() == unsigned{CU_MEMHOSTALLOC_DEVICEMAP});
    CHECK(cudyn::PinnedFlags{false, false, true}.to_cu() == unsigned{CU_MEMHOSTALLOC_WRITECOMBINED});
    CHECK(cudyn::HostRegisterFlags{}.to_cu() == 0u);
    CHECK(cudyn::HostRegisterFlags{true, true, true, true}.to_cu() ==
          unsigned{CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
                   CU_MEMHOSTREGISTER_READ_ONLY});

    // Locations in both driver ABIs, against cuda.h's own constants.
    using cudyn::Location;
    CHECK(Location::device(3).to_cu().type == CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK(Location::device(3).to_cu().id == 3);
    CHECK(Location::host().to_cu().type == CU_MEM_LOCATION_TYPE_HOST);
    CHECK(Location::host_numa(2).to_cu().type == CU_MEM_LOCATION_TYPE_HOST_NUMA);
    CHECK(Location::host_numa(2).to_cu().id == 2);
    CHECK(Location::host_numa_current().to_cu().type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
    CHECK(*Location::device(3).to_legacy_device("cuMemAdvise") == 3);
    CHECK(*Location::host().to_legacy_device("cuMemAdvise") == CU_DEVICE_CPU);
    CHECK(Location::host_numa(0).to_legacy_device("cuMemAdvise").error().code == cudyn::ErrorCode::NotSupported);

    using Policy = cudyn::MigrationPolicy;
    CHECK(Policy::driver_default().kind() == Policy::Kind::Default);
    CHECK_FALSE(Policy::driver_default().preferred_location().has_value());
    CHECK(Policy::prefer_host().preferred_location() == cudyn::Location::host());
    CHECK(Policy::prefer_host().preferred_location()->to_cu().type == CU_MEM_LOCATION_TYPE_HOST);
    CHECK(Policy::prefer_device(3).preferred_location() == cudyn::Location::device(3));
    CHECK(Policy::prefer_host_numa(2).preferred_location() == cudyn::Location::host_numa(2));
    CHECK(Policy::read_mostly().describe() == "read mostly");
    CHECK(Policy::prefer_device(1).describe() == "prefer device 1");
}
