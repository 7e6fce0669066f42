#pragma once
// The plugin's one expected<T, E> (g++ 12 has no std::expected in C++20): a value, or the
// error that says why there is none. Each layer names its error type once:
// wire::result<T> (a refusal in AMQP's vocabulary), bus::bus_result<T> (a bus_error).
#include <utility>
#include <variant>

namespace amqp {

template <class T, class E>
class expected {
 public:
  expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}    // NOLINT
  expected(E error) : state_(std::in_place_index<1>, std::move(error)) {}    // NOLINT
  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const E& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, E> state_;
};

}  // namespace amqp
