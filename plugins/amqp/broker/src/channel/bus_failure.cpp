#include "channel/bus_failure.hpp"

#include <string>

namespace amqp::broker {

wire::refusal bus_failure_reply(bus::bus_errc kind, std::string_view what_failed, std::string_view cause,
                                std::string_view remedy) {
  std::string text{what_failed};
  if (kind == bus::bus_errc::denied) return {wire::reply_code::access_refused, text + ": " + std::string{cause}};
  // Asking again changes nothing: the cause names the limit and how to raise it.
  if (kind == bus::bus_errc::limit) return {wire::reply_code::precondition_failed, std::string{cause}};
  return {wire::reply_code::internal_error, text + " (" + std::string{cause} + "); " + std::string{remedy}};
}

}  // namespace amqp::broker
