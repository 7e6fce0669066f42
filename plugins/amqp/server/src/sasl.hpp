#pragma once
// Who a client says it is in connection.start-ok, as RabbitMQ reads the response of each SASL
// mechanism it offers (PLAIN, AMQPLAIN). Pure functions; the bus decides whether to believe it.
#include <string>
#include <string_view>
#include <variant>

#include "amqp/bus/client.hpp"

namespace amqp::server {

// The credentials, or a sentence saying what is wrong with the response (for a 403).
//   PLAIN:    [authzid] NUL user NUL password (RFC 4616; the authorization identity is ignored,
//             as RabbitMQ ignores it)
//   AMQPLAIN: a field table without its length prefix, holding LOGIN and PASSWORD strings
// A token (or JWT) rides in the password with an empty user.
std::variant<bus::credentials, std::string> read_credentials(std::string_view mechanism, std::string_view response);

}  // namespace amqp::server
