// The X-macro list and the table built from it: static facts, no driver.
#include "support/catch.hpp"

#include "cudyn/loader/driver_table.hpp"

#include <cstring>
#include <set>
#include <string>
#include <utility>

using cudyn::DriverTable;

TEST_CASE("every listed entry has a unique member, name@version and ABI symbol", "[unit][table]") {
    REQUIRE(cudyn::driver_entry_count >= 70);
    std::set<std::pair<std::string, int>> name_versions;
    std::set<std::string> abi_symbols;
    std::set<std::size_t> offsets;
    for (const cudyn::DriverEntryInfo& entry : cudyn::driver_entries) {
        INFO(entry.abi_symbol);
        CHECK(name_versions.insert({entry.name, entry.version}).second);
        CHECK(abi_symbols.insert(entry.abi_symbol).second);
        CHECK(offsets.insert(entry.offset).second);
        CHECK(entry.offset % sizeof(void*) == 0);
        CHECK(entry.offset < sizeof(DriverTable));
        // A suffix belongs to the ABI symbol only: cuGetProcAddress is asked for
        // the base name, and a suffixed name would get SYMBOL_NOT_FOUND.
        CHECK(std::strstr(entry.name, "_v2") == nullptr);
        CHECK(std::strncmp(entry.abi_symbol, entry.name, std::strlen(entry.name)) == 0);
    }
}

TEST_CASE("remapped names resolve to their _v2 ABI, never the 32-bit v1", "[unit][table]") {
    // The unsuffixed cuMemAlloc is the 32-bit v1 ABI; cuda.h maps the name to _v2.
    const auto& alloc = cudyn::entry_info(&DriverTable::cuMemAlloc_v3020);
    CHECK(std::string(alloc.name) == "cuMemAlloc");
    CHECK(std::string(alloc.abi_symbol) == "cuMemAlloc_v2");
    CHECK(alloc.version == 3020);
    CHECK(std::string(cudyn::entry_info(&DriverTable::cuMemFree_v3020).abi_symbol) == "cuMemFree_v2");
    CHECK(std::string(cudyn::entry_info(&DriverTable::cuMemGetInfo_v3020).abi_symbol) == "cuMemGetInfo_v2");
    CHECK(std::string(cudyn::entry_info(&DriverTable::cuMemcpyHtoDAsync_v3020).abi_symbol) == "cuMemcpyHtoDAsync_v2");
    CHECK(std::string(cudyn::entry_info(&DriverTable::cuMemHostGetDevicePointer_v3020).abi_symbol) ==
          "cuMemHostGetDevicePointer_v2");
}

TEST_CASE("entries whose ABI changed are held once per ABI", "[unit][table]") {
    const auto& advise_v1 = cudyn::entry_info(&DriverTable::cuMemAdvise_v8000);
    const auto& advise_v2 = cudyn::entry_info(&DriverTable::cuMemAdvise_v12020);
    CHECK(std::string(advise_v1.abi_symbol) == "cuMemAdvise");
    CHECK(std::string(advise_v2.abi_symbol) == "cuMemAdvise_v2");
    CHECK(advise_v1.required);
    CHECK_FALSE(advise_v2.required);
    CHECK(std::string(cudyn::entry_info(&DriverTable::cuMemPrefetchAsync_v12020).abi_symbol) == "cuMemPrefetchAsync_v2");
    CHECK(std::string(cudyn::entry_info(&DriverTable::cuMemPrefetchAsync_v8000).abi_symbol) == "cuMemPrefetchAsync");
    CHECK(cudyn::entry_info(&DriverTable::cuMemPrefetchBatchAsync_v13000).version == 13000);
    CHECK_FALSE(cudyn::entry_info(&DriverTable::cuMemPrefetchBatchAsync_v13000).required);
}

TEST_CASE("VMM entries are optional (drivers before 10.2 lack them)", "[unit][table]") {
    CHECK_FALSE(cudyn::entry_info(&DriverTable::cuMemCreate_v10020).required);
    CHECK_FALSE(cudyn::entry_info(&DriverTable::cuMemMap_v10020).required);
    CHECK_FALSE(cudyn::entry_info(&DriverTable::cuMemExportToShareableHandle_v10020).required);
    CHECK(cudyn::entry_info(&DriverTable::cuMemAlloc_v3020).required);
}
