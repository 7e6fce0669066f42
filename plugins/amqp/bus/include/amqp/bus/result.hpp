#pragma once
// How the bus layer reports failure: a sentence for the operator, plus enough structure for
// the broker to tell "not there" and "someone else won the race" from a real failure.
#include <string>
#include <utility>
#include <variant>

namespace amqp::bus {

enum class bus_errc {
  failed,     // anything else: the text says what and why
  not_found,  // key / consumer / stream does not exist (kv_get, queue_info, ...)
  conflict,   // revision check lost (kv_update) or key already exists (kv_create)
  timeout,    // no answer within the deadline
  denied,     // the bus refused this client's user: wrong credentials, or a subject it may not use
};

struct bus_error {
  std::string text;          // "<step>: <cause>" — already names what failed
  int js_code = 0;           // JetStream API err_code when the server gave one (e.g. 10071)
  bus_errc kind = bus_errc::failed;
};

// A small expected<T, bus_error> (g++ 12 has no std::expected in C++20).
template <class T>
class bus_result {
 public:
  bus_result(T value) : state_(std::in_place_index<0>, std::move(value)) {}   // NOLINT
  bus_result(bus_error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const bus_error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, bus_error> state_;
};

// Success without a value: `return bus_ok();`.
using bus_status = bus_result<std::monostate>;
inline bus_status bus_ok() { return std::monostate{}; }

}  // namespace amqp::bus
