#pragma once
// The result of a plugin entry point. Entry points are noexcept, so failure travels as a value:
// `ok`, or `error` with one sentence naming the cause and the remedy.
#include <string>
#include <utility>

namespace cloud::plugin_api {

class status {
 public:
  static status ok() { return status{}; }
  static status error(std::string message) { return status{std::move(message)}; }

  bool is_ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return is_ok(); }
  // Empty when ok.
  const std::string& message() const noexcept { return message_; }

 private:
  status() = default;
  explicit status(std::string message) : failed_{true}, message_{std::move(message)} {}

  bool failed_ = false;
  std::string message_;
};

}  // namespace cloud::plugin_api
