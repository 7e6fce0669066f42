#pragma once
// A small expected<T, wire_error> (g++ 12 has no std::expected in C++20).
#include <utility>
#include <variant>

#include "amqp/wire/reply_code.hpp"

namespace amqp::wire {

template <class T>
class result {
 public:
  result(T value) : state_(std::in_place_index<0>, std::move(value)) {}              // NOLINT
  result(wire_error error) : state_(std::in_place_index<1>, std::move(error)) {}     // NOLINT
  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const wire_error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, wire_error> state_;
};

}  // namespace amqp::wire
