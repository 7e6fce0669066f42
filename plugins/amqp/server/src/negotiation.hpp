#pragma once
// The connection handshake's decisions, as pure functions: what connection.start offers and
// how a client's connection.tune-ok is reconciled with the server's connection.tune.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "amqp/broker/broker.hpp"
#include "amqp/wire/methods.hpp"

namespace amqp::server {

// SASL mechanisms offered in connection.start, space-separated as the spec wants. EXTERNAL (the
// verified client certificate's common name is the user) is offered where there is one.
inline constexpr std::string_view offered_mechanisms = "PLAIN AMQPLAIN";
inline constexpr std::string_view offered_with_certificate = "EXTERNAL PLAIN AMQPLAIN";
inline constexpr std::string_view offered_locales = "en_US";

// connection.start as this server sends it (version 0-9, properties, mechanisms, locales).
wire::connection_start make_connection_start(const broker::settings& s, bool external = false);
wire::connection_tune make_connection_tune(const broker::settings& s);

// True when start-ok names one of the offered mechanisms.
bool is_offered_mechanism(std::string_view mechanism, bool external = false);

struct tuned {
  std::uint16_t channel_max = 0;
  std::uint32_t frame_max = 0;
  std::uint16_t heartbeat_seconds = 0;
};
// A refusal is a sentence for connection.close 530, naming the value and the rule.
using tune_result = std::variant<tuned, std::string>;
// channel-max 0 or above the offer → the offer; frame-max 0 or above the offer → the offer,
// below the spec's 4096 minimum → refused; heartbeat as the client chose it (0: none).
tune_result negotiate(const broker::settings& s, const wire::connection_tune_ok& ok);

}  // namespace amqp::server
