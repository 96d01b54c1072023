// 32 threads racing to first use load the driver exactly once. Also built
// under ThreadSanitizer (tests/fake/meson.build).
#include "support/catch.hpp"
#include "support/fake_driver.hpp"

#include "cudyn/loader/driver_table.hpp"
#include "cudyn/loader/loader.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

TEST_CASE("32 threads racing to first use load the driver once", "[emulated][race]") {
    constexpr int kThreads = 32;
    std::mutex mutex;
    std::condition_variable start;
    bool go = false;
    std::vector<const cudyn::LoadReport*> reports(kThreads, nullptr);
    std::vector<const cudyn::DriverTable*> tables(kThreads, nullptr);
    // char, not bool: vector<bool> packs bits, so neighbouring threads would race.
    std::vector<char> usable(kThreads, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            {
                std::unique_lock<std::mutex> lock(mutex);
                start.wait(lock, [&] { return go; });
            }
            // Half go through the table, half through the report: both paths
            // must wait for the one load.
            if (i % 2 == 0) {
                tables[i] = &cudyn::driver();
                reports[i] = &cudyn::load_report();
            } else {
                reports[i] = &cudyn::load_report();
                tables[i] = &cudyn::driver();
            }
            usable[i] = tables[i]->cuMemAlloc_v3020 != nullptr && cudyn::driver_status().has_value();
        });
    }
    {
        std::lock_guard<std::mutex> lock(mutex);
        go = true;
    }
    start.notify_all();
    for (std::thread& thread : threads) thread.join();

    for (int i = 0; i < kThreads; ++i) {
        INFO("thread " << i);
        CHECK(reports[i] == reports[0]);
        CHECK(tables[i] == tables[0]);
        CHECK(usable[i]);
    }
    REQUIRE(reports[0]->state == cudyn::LoadState::Loaded);
    const cudyn_test::FakeDriver& fake = cudyn_test::FakeDriver::loaded();
    CHECK(fake.init_count() == 1);
    CHECK(fake.call_count("cuInit") == 1);
    CHECK(fake.call_count("cuDriverGetVersion") == 1);
    // One resolution per entry, not per thread.
    CHECK(fake.call_count("cuGetProcAddress_v2") == static_cast<long>(cudyn::driver_entry_count));
}
