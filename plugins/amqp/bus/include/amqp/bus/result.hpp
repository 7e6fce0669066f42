#pragma once
// How the bus layer reports failure: a sentence for the operator, plus enough structure for
// the broker to tell "not there" and "someone else won the race" from a real failure.
#include <string>
#include <variant>

#include "amqp/expected.hpp"

namespace amqp::bus {

enum class bus_errc {
  failed,     // anything else: the text says what and why
  not_found,  // key / consumer / stream does not exist (kv_get, queue_info, ...)
  conflict,   // revision check lost (kv_update) or key already exists (kv_create)
  timeout,    // no answer within the deadline
  denied,     // the bus refused this client's user: wrong credentials, or a subject it may not use
  limit,      // the bus holds no more of something (a stream's or account's consumers): the text says which
};

struct bus_error {
  std::string text;          // "<step>: <cause>" — already names what failed
  int js_code = 0;           // JetStream API err_code when the server gave one (e.g. 10071)
  bus_errc kind = bus_errc::failed;
};

template <class T>
using bus_result = expected<T, bus_error>;

// Success without a value: `return bus_ok();`.
using bus_status = bus_result<std::monostate>;
inline bus_status bus_ok() { return std::monostate{}; }

}  // namespace amqp::bus
