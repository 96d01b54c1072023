// fake_enum.hpp — reading enum-typed arguments as plain integers.
//
// Callers may pass any value in a CUresult / CUdevice_attribute /
// CUpointer_attribute / CUmem_advise / CUmem_range_attribute argument (tests
// do, to see CUDA_ERROR_INVALID_VALUE). Loading an out-of-range value through
// the enum type is what clang's -fsanitize=enum (part of
// -fsanitize=undefined) reports, so the fake reads such arguments through
// their bytes and works on int.
#ifndef CUDYN_TESTS_FAKECUDA_FAKE_ENUM_HPP
#define CUDYN_TESTS_FAKECUDA_FAKE_ENUM_HPP

#include <cstring>
#include <type_traits>

namespace fake {

template <typename E>
int raw(const E& e) {
    static_assert(std::is_enum<E>::value && sizeof(E) == sizeof(int), "an int-sized enum");
    int v = 0;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

}  // namespace fake

#endif  // CUDYN_TESTS_FAKECUDA_FAKE_ENUM_HPP
