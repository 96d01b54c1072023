// fake_enum.hpp — enum-typed arguments read as plain integers: tests pass
// out-of-range values to see INVALID_VALUE, and loading one through the enum
// type is what clang's -fsanitize=enum reports, so the fake reads their bytes.
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
