#pragma once
// The one way a bus failure becomes an AMQP reply (a channel exception's code and sentence):
// 403 ACCESS_REFUSED when the bus refused the connection's user (a subject permission, an
// account), naming what was refused and the bus's reason, which names the user and the subject;
// 406 PRECONDITION_FAILED when it is at a limit of its own, with the bus's sentence, which names
// the limit and the remedy; anything else 541 INTERNAL_ERROR, saying what did not happen, the
// bus's cause and the remedy.
#include <string_view>

#include "amqp/bus/result.hpp"
#include "amqp/wire/reply_code.hpp"

namespace amqp::broker {

wire::refusal bus_failure_reply(bus::bus_errc kind, std::string_view what_failed, std::string_view cause,
                                std::string_view remedy);

}  // namespace amqp::broker
