// cudyn — Result<T>: a value or an Error, never an exception.
#pragma once

#include "cudyn/error.hpp"

#include <cstdlib>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

namespace cudyn {

namespace detail {
// Reading a value that is not there is a programming error; the library has no
// exceptions, so it stops the program with a message instead of reading garbage.
[[noreturn]] void fail_bad_result_access(const Error& error) noexcept;
}  // namespace detail

// Expected-like: has_value(), value(), error(). [[nodiscard]] so that an
// ignored failure is a compiler warning.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}
    // The value built where the Result lives (no move of a finished T).
    template <typename... Args>
    explicit Result(std::in_place_t, Args&&... args) : state_(std::in_place_index<0>, std::forward<Args>(args)...) {}

    bool has_value() const noexcept { return state_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    T& value() & { check(); return std::get<0>(state_); }
    const T& value() const& { check(); return std::get<0>(state_); }
    T&& value() && { check(); return std::get<0>(std::move(state_)); }

    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    // The error; only meaningful when !has_value().
    const Error& error() const& { return std::get<1>(state_); }
    Error&& error() && { return std::get<1>(std::move(state_)); }

    template <typename U>
    T value_or(U&& fallback) const& {
        return has_value() ? std::get<0>(state_) : static_cast<T>(std::forward<U>(fallback));
    }

private:
    void check() const {
        if (!has_value()) detail::fail_bad_result_access(std::get<1>(state_));
    }
    std::variant<T, Error> state_;
};

// Success is an empty optional: no Error (and none of its strings) is built
// on the success path, which every driver call takes.
template <>
class [[nodiscard]] Result<void> {
public:
    // User-provided (not `= default`) on purpose: `return {};` and ok() then
    // only mark the optional empty instead of zero-filling the whole Error.
    Result() noexcept {}
    Result(Error error) : error_(std::move(error)) {}

    bool has_value() const noexcept { return !error_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }
    void value() const {
        if (error_) detail::fail_bad_result_access(*error_);
    }
    const Error& error() const& { return *error_; }
    Error&& error() && { return std::move(*error_); }

private:
    std::optional<Error> error_;
};

// Success of Result<void>, spelled out: `return ok();`
inline Result<void> ok() { return {}; }

}  // namespace cudyn

// Propagates a failed Result from the enclosing function. The library's one
// macro: it keeps the many "call, and return the error if it failed" steps short.
#define CUDYN_TRY(expr)                                   \
    do {                                                  \
        auto cudyn_try_result_ = (expr);                  \
        if (!cudyn_try_result_.has_value())               \
            return std::move(cudyn_try_result_).error();  \
    } while (0)
