#pragma once
// A refusal is how every routing function says "no": an AMQP reply code and one sentence
// naming the cause and the remedy. `outcome<T>` is a small expected<T, refusal> (g++ 12 has
// no std::expected), shaped like wire::result so callers use one idiom for both.
#include <string>
#include <utility>
#include <variant>

#include "amqp/wire/reply_code.hpp"

namespace amqp::routing {

// `text` is the sentence only, without the "PRECONDITION_FAILED - " prefix: the broker
// formats the reply text with wire::reply_text(code, text) so the two always agree.
struct refusal {
  wire::reply_code code = wire::reply_code::precondition_failed;
  std::string text;
  friend bool operator==(const refusal&, const refusal&) = default;
};

template <class T>
class outcome {
 public:
  outcome(T value) : state_(std::in_place_index<0>, std::move(value)) {}          // NOLINT
  outcome(refusal error) : state_(std::in_place_index<1>, std::move(error)) {}    // NOLINT
  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const refusal& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, refusal> state_;
};

}  // namespace amqp::routing
