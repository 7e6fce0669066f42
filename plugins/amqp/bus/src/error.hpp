#pragma once
// The one place a nats.c status becomes a sentence.
#include <nats/nats.h>

#include <string>
#include <string_view>

#include "amqp/bus/result.hpp"

namespace amqp::bus::detail {

// "<step>: <natsStatus text>[: <nats_GetLastError detail>]", kind from the status. Must run on
// the thread that made the failing call (nats_GetLastError is thread-local).
bus_error nats_failure(std::string_view step, natsStatus s, jsErrCode js_code = static_cast<jsErrCode>(0));
bus_error failure(std::string_view step, std::string_view cause, bus_errc kind = bus_errc::failed,
                  int js_code = 0);
// What a JetStream error code tells a caller: a lost revision race, something not found, or
// nothing of its own (failed).
bus_errc kind_of_js_code(int js_code);

}  // namespace amqp::bus::detail
