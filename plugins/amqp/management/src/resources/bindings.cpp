// Bindings of queues to exchanges: listed from the topology mirror (each queue's implicit one from
// the default exchange included); made and removed through an operator channel. Exchange-to-exchange
// bindings are refused by the broker, so none has an exchange as its destination.
#include "handlers.hpp"
#include "writes.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;

json bindings_in(const std::vector<vhost>& in) { return from_mirrors(in, bindings_json); }

json between(const call& c) {
  return only(only(bindings_in(c.in), "source", c.arg("source")), "destination", c.arg("destination"));
}

}  // namespace

handled bindings(api&, const call& c) { co_return c.list(bindings_in(c.in)); }

handled queue_bindings(api&, const call& c) {
  co_return c.list(only(bindings_in(c.in), "destination", c.arg("name")));
}

handled exchange_bindings_source(api&, const call& c) {
  co_return c.list(only(bindings_in(c.in), "source", c.arg("name")));
}

handled exchange_bindings_destination(api&, const call& c) { co_return c.list(json::array()); }

handled bindings_between(api&, const call& c) { co_return c.list(between(c)); }

handled one_binding(api&, const call& c) {
  auto found = only(between(c), "routing_key", routing_key_of(c.arg("props")));
  if (found.empty()) co_return not_found();
  co_return json_reply(200, found[0]);
}

// 201 with the new binding's properties_key as its Location, as RabbitMQ answers.
handled bind_queue(api& a, const call& c) {
  auto asked = binding_request(c.arg("source"), c.arg("destination"), c.r.body);
  if (!asked.value) co_return bad_request(asked.why);
  auto made = created();
  made.location = properties_key(asked.value->routing_key);
  wire::method m = std::move(*asked.value);
  auto answered = co_await a.one_method(c.v(), c.who, std::move(m), is<wire::queue_bind_ok>, made);
  co_return answered;
}

// RabbitMQ answers 404 for a binding that is not there.
handled unbind_queue(api& a, const call& c) {
  const auto& exchange = c.arg("source");
  const auto& queue = c.arg("destination");
  const auto key = routing_key_of(c.arg("props"));
  const auto t = broker::topology_of(*c.v().broker);
  const auto* def = t.find_queue(queue);
  if (!def || std::none_of(def->bindings.begin(), def->bindings.end(),
                           [&](const routing::binding& b) { return b.names(exchange, key); }))
    co_return not_found();
  wire::method m = wire::queue_unbind{0, queue, exchange, key, {}};
  auto answered = co_await a.one_method(c.v(), c.who, std::move(m), is<wire::queue_unbind_ok>, no_content());
  co_return answered;
}

}  // namespace amqp::management
