#include "negotiation.hpp"

#include <algorithm>
#include <array>

#include "amqp/wire/frame.hpp"

namespace amqp::server {
namespace {

wire::field_table capabilities() {
  // Only what is true of this server. connection.blocked is not claimed: the server never
  // sends it; exchange-to-exchange bindings are refused (HIP-1326, "What is not implemented,
  // and how it says so"), so that one is false. authentication_failure_close: a refused
  // start-ok gets connection.close 403, not a bare socket close.
  wire::field_table t;
  t.entries.push_back({"publisher_confirms", true});
  t.entries.push_back({"basic.nack", true});
  t.entries.push_back({"consumer_cancel_notify", true});
  t.entries.push_back({"per_consumer_qos", true});
  t.entries.push_back({"authentication_failure_close", true});
  t.entries.push_back({"exchange_exchange_bindings", false});
  return t;
}

wire::field_table server_properties(const broker::settings& s) {
  wire::field_table t;
  t.entries.push_back({"product", s.product});
  t.entries.push_back({"version", s.version.empty() ? std::string("0") : s.version});
  t.entries.push_back({"platform", std::string("C++20, Boost.Asio, NATS JetStream")});
  t.entries.push_back({"copyright", std::string("Hanzo AI; see the package's copyright file")});
  t.entries.push_back({"information", std::string("AMQP 0-9-1 translated onto JetStream (HIP-1326)")});
  t.entries.push_back({"capabilities", capabilities()});
  return t;
}

}  // namespace

wire::connection_start make_connection_start(const broker::settings& s, bool external) {
  wire::connection_start start;
  start.version_major = 0;
  start.version_minor = 9;
  start.server_properties = server_properties(s);
  start.mechanisms = std::string(external ? offered_with_certificate : offered_mechanisms);
  start.locales = std::string(offered_locales);
  return start;
}

wire::connection_tune make_connection_tune(const broker::settings& s) {
  wire::connection_tune tune;
  tune.channel_max = s.channel_max;
  tune.frame_max = s.frame_max;
  tune.heartbeat = s.heartbeat_seconds;
  return tune;
}

bool is_offered_mechanism(std::string_view mechanism, bool external) {
  static constexpr std::array<std::string_view, 2> offered{"PLAIN", "AMQPLAIN"};
  if (external && mechanism == "EXTERNAL") return true;
  return std::find(offered.begin(), offered.end(), mechanism) != offered.end();
}

tune_result negotiate(const broker::settings& s, const wire::connection_tune_ok& ok) {
  tuned t;
  t.channel_max = (ok.channel_max == 0 || ok.channel_max > s.channel_max) ? s.channel_max : ok.channel_max;
  if (ok.frame_max != 0 && ok.frame_max < wire::min_frame_max) {
    return "tune-ok frame-max " + std::to_string(ok.frame_max) + " is below the protocol minimum of " +
           std::to_string(wire::min_frame_max) + " octets; ask for at least " +
           std::to_string(wire::min_frame_max) + " (or 0 to accept the server's " +
           std::to_string(s.frame_max) + ")";
  }
  t.frame_max = (ok.frame_max == 0 || ok.frame_max > s.frame_max) ? s.frame_max : ok.frame_max;
  t.heartbeat_seconds = ok.heartbeat;
  return t;
}

}  // namespace amqp::server
