// cudyn — Result<T>: a value or an Error, never an exception. It follows
// C++23's std::expected<T, Error> as far as C++17 allows, so code written
// against one reads the same against the other:
//
//     cudyn::Result<std::size_t> free_bytes = cudyn::current_device_memory_info()
//         .transform([](const cudyn::DeviceMemoryInfo& info) { return info.free_bytes; });
//     CUDYN_TRY_ASSIGN(auto buffer, cudyn::DeviceBuffer<float>::allocate(n));   // or return the error
//
// Differences from std::expected, and why:
//  * value() on a failure stops the program with the error's text instead of
//    throwing: cudyn promises to throw nothing, so there is nothing to catch.
//  * error() on a success is a precondition violation (as it is for
//    std::expected); debug builds stop with a message, release builds do not
//    check. It never throws.
//  * the error type is always cudyn::Error.
// to_expected() / from_expected() convert in one call where <expected> exists.
#pragma once

#include "cudyn/core/error.hpp"

#include <cstdlib>
#include <functional>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#if defined(__has_include)
#if __has_include(<version>)
#include <version>
#endif
#endif
#if defined(__cpp_lib_expected) && __cpp_lib_expected >= 202202L
#include <expected>
#define CUDYN_HAS_STD_EXPECTED 1
#endif

namespace cudyn {

template <typename T>
class Result;

namespace detail {
// Reading a value that is not there is a programming error; the library has no
// exceptions, so it stops the program with a message instead of reading garbage.
[[noreturn]] void fail_bad_result_access(const Error& error) noexcept;
// error() asked of a success: stops in debug builds (release builds skip the check).
[[noreturn]] void fail_error_of_success() noexcept;

template <typename T>
struct IsResult : std::false_type {};
template <typename T>
struct IsResult<Result<T>> : std::true_type {};

template <typename T>
using RemoveCvref = std::remove_cv_t<std::remove_reference_t<T>>;

// The Result a continuation returns; and_then / or_else require one.
template <typename F, typename... Args>
using ContinuationResult = RemoveCvref<std::invoke_result_t<F, Args...>>;
}  // namespace detail

// [[nodiscard]] so that an ignored failure is a compiler warning.
template <typename T>
class [[nodiscard]] Result {
    static_assert(!std::is_reference_v<T>, "Result holds values; use std::reference_wrapper for references");
    static_assert(!std::is_same_v<detail::RemoveCvref<T>, Error>, "Result<Error> would be ambiguous");

public:
    using value_type = T;
    using error_type = Error;
    template <typename U>
    using rebind = Result<U>;

    // A value (anything T is constructible from, as for std::expected).
    template <typename U = T,
              typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                          !std::is_same_v<detail::RemoveCvref<U>, Result> &&
                                          !std::is_same_v<detail::RemoveCvref<U>, Error> &&
                                          !std::is_same_v<detail::RemoveCvref<U>, std::in_place_t>>>
    Result(U&& value) : state_(std::in_place_index<0>, std::forward<U>(value)) {}
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}
    // The value built where the Result lives (no move of a finished T).
    template <typename... Args>
    explicit Result(std::in_place_t, Args&&... args) : state_(std::in_place_index<0>, std::forward<Args>(args)...) {}

    bool has_value() const noexcept { return state_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    // The value; on a failure the program stops with the error's text.
    T& value() & { return checked(*this); }
    const T& value() const& { return checked(*this); }
    T&& value() && { return std::move(checked(*this)); }
    const T&& value() const&& { return std::move(checked(*this)); }

    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    const T&& operator*() const&& { return std::move(*this).value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    // The error. Precondition: !has_value().
    const Error& error() const& noexcept { return *error_pointer(); }
    Error& error() & noexcept { return *error_pointer(); }
    Error&& error() && noexcept { return std::move(*error_pointer()); }

    template <typename U>
    T value_or(U&& fallback) const& {
        return has_value() ? *std::get_if<0>(&state_) : static_cast<T>(std::forward<U>(fallback));
    }
    template <typename U>
    T value_or(U&& fallback) && {
        return has_value() ? std::move(*std::get_if<0>(&state_)) : static_cast<T>(std::forward<U>(fallback));
    }

    // f(value) -> Result<U>: chained on success; the error passed on otherwise.
    template <typename F>
    auto and_then(F&& f) & { return and_then_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto and_then(F&& f) const& { return and_then_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto and_then(F&& f) && { return and_then_impl(std::move(*this), std::forward<F>(f)); }

    // f(value) -> U: Result<U> of it on success (Result<void> when f returns nothing).
    template <typename F>
    auto transform(F&& f) & { return transform_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto transform(F&& f) const& { return transform_impl(*this, std::forward<F>(f)); }
    template <typename F>
    auto transform(F&& f) && { return transform_impl(std::move(*this), std::forward<F>(f)); }

    // f(error) -> Result<T>: a second chance on failure; the value passed on otherwise.
    template <typename F>
    Result or_else(F&& f) const& { return or_else_impl(*this, std::forward<F>(f)); }
    template <typename F>
    Result or_else(F&& f) && { return or_else_impl(std::move(*this), std::forward<F>(f)); }

    // f(error) -> Error: the failure reworded (context added, say).
    template <typename F>
    Result transform_error(F&& f) const& { return transform_error_impl(*this, std::forward<F>(f)); }
    template <typename F>
    Result transform_error(F&& f) && { return transform_error_impl(std::move(*this), std::forward<F>(f)); }

private:
    template <typename Self>
    static decltype(auto) checked(Self& self) {
        if (!self.has_value()) detail::fail_bad_result_access(*std::get_if<1>(&self.state_));
        return *std::get_if<0>(&self.state_);
    }
    Error* error_pointer() noexcept { return const_cast<Error*>(std::as_const(*this).error_pointer()); }
    const Error* error_pointer() const noexcept {
#ifndef NDEBUG
        if (has_value()) detail::fail_error_of_success();
#endif
        return std::get_if<1>(&state_);
    }

    // Self is Result&, const Result& or Result&&; the value and error are
    // forwarded as Self is.
    template <typename Self>
    static decltype(auto) forward_value(Self&& self) {
        return *std::forward<Self>(self);
    }
    template <typename Self>
    static decltype(auto) forward_error(Self&& self) {
        return std::forward<Self>(self).error();
    }

    template <typename Self, typename F>
    static auto and_then_impl(Self&& self, F&& f) {
        using Next = detail::ContinuationResult<F, decltype(forward_value(std::forward<Self>(self)))>;
        static_assert(detail::IsResult<Next>::value, "and_then: the function must return a cudyn::Result");
        if (!self.has_value()) return Next(forward_error(std::forward<Self>(self)));
        return std::invoke(std::forward<F>(f), forward_value(std::forward<Self>(self)));
    }
    template <typename Self, typename F>
    static auto transform_impl(Self&& self, F&& f) {
        using U = std::remove_cv_t<std::invoke_result_t<F, decltype(forward_value(std::forward<Self>(self)))>>;
        if (!self.has_value()) return Result<U>(forward_error(std::forward<Self>(self)));
        if constexpr (std::is_void_v<U>) {
            std::invoke(std::forward<F>(f), forward_value(std::forward<Self>(self)));
            return Result<U>();
        } else {
            return Result<U>(std::in_place, std::invoke(std::forward<F>(f), forward_value(std::forward<Self>(self))));
        }
    }
    template <typename Self, typename F>
    static Result or_else_impl(Self&& self, F&& f) {
        using Next = detail::ContinuationResult<F, decltype(forward_error(std::forward<Self>(self)))>;
        static_assert(std::is_same_v<Next, Result>, "or_else: the function must return the same Result type");
        if (self.has_value()) return Result(std::in_place, forward_value(std::forward<Self>(self)));
        return std::invoke(std::forward<F>(f), forward_error(std::forward<Self>(self)));
    }
    template <typename Self, typename F>
    static Result transform_error_impl(Self&& self, F&& f) {
        if (self.has_value()) return Result(std::in_place, forward_value(std::forward<Self>(self)));
        return Result(Error(std::invoke(std::forward<F>(f), forward_error(std::forward<Self>(self)))));
    }

    std::variant<T, Error> state_;
};

// Success is an empty optional: no Error (and none of its strings) is built
// on the success path, which every driver call takes.
template <>
class [[nodiscard]] Result<void> {
public:
    using value_type = void;
    using error_type = Error;
    template <typename U>
    using rebind = Result<U>;

    // User-provided (not `= default`) on purpose: `return {};` and ok() then
    // only mark the optional empty instead of zero-filling the whole Error.
    Result() noexcept {}
    Result(Error error) : error_(std::move(error)) {}
    explicit Result(std::in_place_t) noexcept {}

    bool has_value() const noexcept { return !error_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }
    // Nothing to read; on a failure the program stops with the error's text.
    void value() const {
        if (error_) detail::fail_bad_result_access(*error_);
    }
    void operator*() const noexcept {}

    // The error. Precondition: !has_value().
    const Error& error() const& noexcept { return *error_pointer(); }
    Error& error() & noexcept { return *error_pointer(); }
    Error&& error() && noexcept { return std::move(*error_pointer()); }

    // f() -> Result<U>, on success.
    template <typename F>
    auto and_then(F&& f) const& {
        using Next = detail::ContinuationResult<F>;
        static_assert(detail::IsResult<Next>::value, "and_then: the function must return a cudyn::Result");
        if (!has_value()) return Next(error());
        return std::invoke(std::forward<F>(f));
    }
    template <typename F>
    auto and_then(F&& f) && {
        using Next = detail::ContinuationResult<F>;
        static_assert(detail::IsResult<Next>::value, "and_then: the function must return a cudyn::Result");
        if (!has_value()) return Next(std::move(*this).error());
        return std::invoke(std::forward<F>(f));
    }
    // f() -> U: Result<U> of it on success.
    template <typename F>
    auto transform(F&& f) const& {
        using U = std::remove_cv_t<std::invoke_result_t<F>>;
        if (!has_value()) return Result<U>(error());
        if constexpr (std::is_void_v<U>) {
            std::invoke(std::forward<F>(f));
            return Result<U>();
        } else {
            return Result<U>(std::in_place, std::invoke(std::forward<F>(f)));
        }
    }
    // f(error) -> Result<void>, on failure.
    template <typename F>
    Result or_else(F&& f) const& {
        static_assert(std::is_same_v<detail::ContinuationResult<F, const Error&>, Result>,
                      "or_else: the function must return cudyn::Result<void>");
        if (has_value()) return {};
        return std::invoke(std::forward<F>(f), error());
    }
    template <typename F>
    Result or_else(F&& f) && {
        static_assert(std::is_same_v<detail::ContinuationResult<F, Error&&>, Result>,
                      "or_else: the function must return cudyn::Result<void>");
        if (has_value()) return {};
        return std::invoke(std::forward<F>(f), std::move(*this).error());
    }
    // f(error) -> Error, on failure.
    template <typename F>
    Result transform_error(F&& f) const& {
        if (has_value()) return {};
        return Result(Error(std::invoke(std::forward<F>(f), error())));
    }
    template <typename F>
    Result transform_error(F&& f) && {
        if (has_value()) return {};
        return Result(Error(std::invoke(std::forward<F>(f), std::move(*this).error())));
    }

private:
    Error* error_pointer() noexcept { return const_cast<Error*>(std::as_const(*this).error_pointer()); }
    const Error* error_pointer() const noexcept {
#ifndef NDEBUG
        if (!error_) detail::fail_error_of_success();
#endif
        return &*error_;
    }
    std::optional<Error> error_;
};

// Success of Result<void>, spelled out: `return ok();`
inline Result<void> ok() { return {}; }

#ifdef CUDYN_HAS_STD_EXPECTED
// One call each way between Result<T> and std::expected<T, Error>.
template <typename T>
std::expected<T, Error> to_expected(Result<T> result) {
    if (!result) return std::unexpected(std::move(result).error());
    if constexpr (std::is_void_v<T>) {
        return {};
    } else {
        return std::move(result).value();
    }
}
template <typename T>
Result<T> from_expected(std::expected<T, Error> expected) {
    if (!expected) return Result<T>(std::move(expected).error());
    if constexpr (std::is_void_v<T>) {
        return Result<T>();
    } else {
        return Result<T>(std::in_place, std::move(expected).value());
    }
}
#endif

}  // namespace cudyn

#define CUDYN_DETAIL_CONCAT_INNER(a, b) a##b
#define CUDYN_DETAIL_CONCAT(a, b) CUDYN_DETAIL_CONCAT_INNER(a, b)

// Returns a failed Result's error from the enclosing function (which returns
// any cudyn::Result), and goes on otherwise.
#define CUDYN_TRY(expr)                                   \
    do {                                                  \
        auto cudyn_try_result_ = (expr);                  \
        if (!cudyn_try_result_.has_value())               \
            return std::move(cudyn_try_result_).error();  \
    } while (0)

// Binds the value of a Result to `declaration`, or returns its error from the
// enclosing function:
//     CUDYN_TRY_ASSIGN(auto buffer, DeviceBuffer<float>::allocate(n));
//     CUDYN_TRY_ASSIGN(existing, compute());   // assigns to a variable declared before
// It expands to more than one statement: not the lone body of an if or a loop.
#define CUDYN_TRY_ASSIGN(declaration, expr) \
    CUDYN_DETAIL_TRY_ASSIGN(CUDYN_DETAIL_CONCAT(cudyn_try_assign_, __LINE__), declaration, expr)
#define CUDYN_DETAIL_TRY_ASSIGN(temporary, declaration, expr) \
    auto temporary = (expr);                                  \
    if (!temporary.has_value()) return std::move(temporary).error(); \
    declaration = *std::move(temporary)
