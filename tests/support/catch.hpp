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
#include <catch2/catch.hpp>
#endif
