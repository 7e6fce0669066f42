// Exchanges: listed from the topology mirror; declared, deleted and published to through an
// operator channel, as AMQP methods.
#include "handlers.hpp"
#include "writes.hpp"
#include "amqp/wire/codec.hpp"

namespace amqp::management {

using json = nlohmann::json;

handled exchanges(api&, const call& c) { co_return c.list(from_mirrors(c.in, exchanges_json)); }

// amq.default is how RabbitMQ's API names the default exchange, which the mirror lists as "".
handled one_exchange(api&, const call& c) {
  const auto& name = c.arg("name");
  auto found = only(from_mirrors(c.in, exchanges_json), "name", name == "amq.default" ? "" : name);
  if (found.empty()) co_return not_found();
  co_return json_reply(200, found[0]);
}

handled delete_exchange(api& a, const call& c) {
  const auto& name = c.arg("name");
  if (broker::topology_of(*c.v().broker).find_exchange(name) == nullptr) co_return not_found();
  wire::method m = wire::exchange_delete_{0, name, query_flag(c.r.query, "if-unused"), false};
  auto answered = co_await a.one_method(c.v(), c.who, std::move(m), is<wire::exchange_delete_ok>, no_content());
  co_return answered;
}

// Mandatory and confirmed, so the answer says whether the message was routed and stored.
handled publish(api& a, const call& c) {
  auto asked = publication_request(c.arg("name"), c.r.body);
  if (!asked.value) co_return bad_request(asked.why);
  auto& p = *asked.value;
  auto ch = co_await a.open_operator(c.v(), c.who);
  if (!ch) co_return refused_vhost();
  wire::confirm_select select{false};
  auto confirmed = co_await ch->call(std::move(select), is<wire::confirm_select_ok>);
  if (confirmed.refused || confirmed.timed_out) co_return refused_reply(confirmed, "basic.publish");
  auto octets = wire::encode_properties(p.properties);
  auto sent = co_await ch->publish(std::move(p.method), std::move(octets), std::move(p.payload), settled_publish);
  if (sent.refused || sent.timed_out) co_return refused_reply(sent, "basic.publish");
  const bool returned = std::any_of(sent.frames.begin(), sent.frames.end(), is<wire::basic_return_>);
  if (is<wire::basic_nack>(sent.frames.back())) co_return error_reply(500, "nacked", "the bus did not store the message");
  co_return json_reply(200, json{{"routed", !returned}});
}

}  // namespace amqp::management
