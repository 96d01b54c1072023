// cudyn — HostSpan<T>: a view of host elements (pointer + count), C++17's
// stand-in for std::span, used by every copy to or from host memory.
#pragma once

#include <cstddef>
#include <iterator>
#include <type_traits>

namespace cudyn {

template <typename T>
class HostSpan {
    // Containers with data() and size() (std::vector, std::array, std::string,
    // another HostSpan) whose data() converts to T*. A temporary container is
    // accepted only for a span of const T, which cannot outlive the call that
    // reads it by accident of writing through it.
    template <typename Container>
    using EnableContainer = std::enable_if_t<
        !std::is_same_v<std::remove_cv_t<std::remove_reference_t<Container>>, HostSpan> &&
        std::is_convertible_v<decltype(std::data(std::declval<Container&>())), T*> &&
        std::is_integral_v<decltype(std::size(std::declval<Container&>()))> &&
        (std::is_lvalue_reference_v<Container> || std::is_const_v<T>)>;

public:
    using element_type = T;

    constexpr HostSpan() noexcept = default;
    constexpr HostSpan(T* data, std::size_t count) noexcept : data_(data), count_(count) {}
    template <std::size_t N>
    constexpr HostSpan(T (&array)[N]) noexcept : data_(array), count_(N) {}
    template <typename Container, typename = EnableContainer<Container>>
    constexpr HostSpan(Container&& container) noexcept
        : data_(std::data(container)), count_(static_cast<std::size_t>(std::size(container))) {}

    constexpr T* data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return count_; }
    constexpr std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
    constexpr bool empty() const noexcept { return count_ == 0; }
    constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
    constexpr T* begin() const noexcept { return data_; }
    constexpr T* end() const noexcept { return data_ + count_; }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

// HostSpan(vector) deduces the element type, as std::span does (const for a
// const container).
template <typename T, std::size_t N>
HostSpan(T (&)[N]) -> HostSpan<T>;
template <typename Container>
HostSpan(Container&) -> HostSpan<std::remove_pointer_t<decltype(std::data(std::declval<Container&>()))>>;
template <typename Container>
HostSpan(const Container&) -> HostSpan<std::remove_pointer_t<decltype(std::data(std::declval<const Container&>()))>>;

}  // namespace cudyn
