// The definitions file: exported from the topology mirrors; imported as policies, then exchanges,
// then queues, then bindings, each vhost on an operator channel of its own (definitions.hpp reads
// the file and refuses what cannot be applied).
#include <algorithm>

#include "definitions.hpp"
#include "handlers.hpp"
#include "properties_json.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;

// The vhosts a file names, each of which this process must serve.
std::vector<std::string> named_vhosts(const definitions& defs) {
  std::vector<std::string> named = defs.vhosts;
  for (const auto& e : defs.exchanges) named.push_back(e.vhost);
  for (const auto& q : defs.queues) named.push_back(q.vhost);
  for (const auto& b : defs.bindings) named.push_back(b.vhost);
  for (const auto& p : defs.policies) named.push_back(p.vhost);
  return named;
}

handled declare_all(operator_channel& ch, const vhost& v, const definitions& defs) {
  std::string why;
  for (const auto& e : defs.exchanges) {
    if (e.vhost != v.name) continue;
    auto arguments = table_of(e.arguments, why);
    if (!arguments) co_return bad_request("exchange '" + e.name + "': " + why);
    wire::exchange_declare m{0, e.name, e.type, false, e.durable, e.auto_delete, e.internal, false, std::move(*arguments)};
    auto done = co_await ch.call(std::move(m), is<wire::exchange_declare_ok>);
    if (done.refused || done.timed_out) co_return refused_reply(done, "exchange.declare");
  }
  for (const auto& q : defs.queues) {
    if (q.vhost != v.name) continue;
    auto arguments = table_of(q.arguments, why);
    if (!arguments) co_return bad_request("queue '" + q.name + "': " + why);
    wire::queue_declare m{0, q.name, false, q.durable, false, q.auto_delete, false, std::move(*arguments)};
    auto done = co_await ch.call(std::move(m), is<wire::queue_declare_ok>);
    if (done.refused || done.timed_out) co_return refused_reply(done, "queue.declare");
  }
  for (const auto& b : defs.bindings) {
    if (b.vhost != v.name) continue;
    wire::queue_bind m{0, b.destination, b.source, b.routing_key, false, {}};
    auto done = co_await ch.call(std::move(m), is<wire::queue_bind_ok>);
    if (done.refused || done.timed_out) co_return refused_reply(done, "queue.bind");
  }
  co_return no_content();
}

handled import_into(api& a, const vhost& v, const definitions& defs, const principal& who) {
  for (const auto& p : defs.policies) {
    if (p.vhost != v.name) continue;
    auto answered = co_await write_policy(v, who, p.name, p.json);
    if (answered.status >= 300) co_return answered;
  }
  auto ch = co_await a.open_operator(v, who);
  if (!ch) co_return refused_vhost();
  auto answered = co_await declare_all(*ch, v, defs);
  co_return answered;
}

}  // namespace

handled export_file(api& a, const call& c) {
  std::vector<std::pair<std::string, routing::topology>> mirrors;
  for (const auto& v : c.in) mirrors.emplace_back(v.name, broker::topology_of(*v.broker));
  co_return json_reply(200, export_definitions(mirrors, a.src().product_version, c.args.find("vhost") != nullptr));
}

handled import_file(api& a, const call& c) {
  auto file = json::parse(c.r.body, nullptr, false);
  const auto* only = c.args.find("vhost");
  std::string why;
  auto defs = import_definitions(file.is_discarded() ? json() : file,
                                 only ? std::optional<std::string>(*only) : std::nullopt, why);
  if (!defs) co_return bad_request(why);
  const auto named = named_vhosts(*defs);
  for (const auto& name : named)
    if (!a.find(name)) co_return bad_request("vhost '" + name + "' is not served here; CLOUD_AMQP_VHOSTS lists the others");
  for (const auto& v : a.src().vhosts) {
    if (std::find(named.begin(), named.end(), v.name) == named.end()) continue;
    auto answered = co_await import_into(a, v, *defs, c.who);
    if (answered.status != 204) co_return answered;
  }
  co_return no_content();
}

}  // namespace amqp::management
