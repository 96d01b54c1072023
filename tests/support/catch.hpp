// Test-side shim: Catch2 3.x (split headers) where installed, else the 2.x
// single header (Debian bookworm ships 2.13). Tests use only macros both have.
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_macros.hpp>
#else
#if defined(CUDYN_TEST_MAIN)
#define CATCH_CONFIG_RUNNER
#endif
#if defined(CUDYN_CATCH2_SINGLE_HEADER)  // cross builds: the build machine's 2.x header, by path
#include CUDYN_CATCH2_SINGLE_HEADER
#else
#include <catch2/catch.hpp>
#endif
#endif
