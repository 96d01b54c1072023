// The version a program is compiled with (version.hpp's macros) and the one
// the library it loaded reports are the same for a build of this tree, and
// the string is the three numbers. Runs with no driver.
#include "support/catch.hpp"

#include "cudyn/core/version.hpp"

#include <string>

TEST_CASE("library_version is the headers' version", "[unit]") {
    const std::string expected = std::to_string(CUDYN_VERSION_MAJOR) + "." + std::to_string(CUDYN_VERSION_MINOR) +
                                 "." + std::to_string(CUDYN_VERSION_PATCH);
    CHECK(std::string(CUDYN_VERSION_STRING) == expected);
    CHECK(std::string(cudyn::library_version()) == expected);
}
