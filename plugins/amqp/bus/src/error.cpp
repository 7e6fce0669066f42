#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// A replicated stream refuses an expected-last-sequence write it finds another one in flight for
// with this code, not 10071; nats.c's list predates it.
constexpr int wrong_last_sequence_in_flight = 10164;

bus_errc kind_of(natsStatus s, int js_code) {
  if (const auto kind = kind_of_js_code(js_code); kind != bus_errc::failed) return kind;
  switch (s) {
    case NATS_NOT_FOUND: return bus_errc::not_found;
    case NATS_TIMEOUT: return bus_errc::timeout;
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED: return bus_errc::denied;
    default: return bus_errc::failed;
  }
}

}  // namespace

bus_errc kind_of_js_code(int js_code) {
  if (js_code == JSStreamWrongLastSequenceErr || js_code == wrong_last_sequence_in_flight) return bus_errc::conflict;
  if (js_code == JSConsumerNotFoundErr || js_code == JSStreamNotFoundErr || js_code == JSNoMessageFoundErr)
    return bus_errc::not_found;
  return bus_errc::failed;
}

bus_error nats_failure(std::string_view step, natsStatus s, jsErrCode js_code) {
  std::string text{step};
  text += ": ";
  text += natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  // The thread-local last error may belong to an older call; only trust it for this status.
  if (detail != nullptr && *detail != '\0' && last == s) {
    std::string_view d{detail};
    if (d != natsStatus_GetText(s)) {
      text += " (";
      text += d;
      text += ')';
    }
  }
  const int code = static_cast<int>(js_code);
  if (code != 0) text += " [JetStream error " + std::to_string(code) + "]";
  return bus_error{std::move(text), code, kind_of(s, code)};
}

bus_error failure(std::string_view step, std::string_view cause, bus_errc kind, int js_code) {
  std::string text{step};
  text += ": ";
  text += cause;
  return bus_error{std::move(text), js_code, kind};
}

}  // namespace amqp::bus::detail
