// Queues: listed from the topology mirror with the bus's counts; declared, deleted, purged and
// read (POST .../get) through an operator channel, as AMQP methods.
#include <map>

#include "handlers.hpp"
#include "off_loop.hpp"
#include "writes.hpp"
#include "amqp/routing/names.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;

std::uint32_t count_of(const std::map<std::string, std::uint32_t>& counts, const std::string& queue) {
  auto c = counts.find(queue);
  return c == counts.end() ? 0 : c->second;
}

}  // namespace

handled queues(api& a, const call& c) {
  json items = json::array();
  for (const auto& v : c.in) {
    const auto t = broker::topology_of(*v.broker);
    const auto consumers = consumer_counts(*v.broker);
    auto count = [v, &t] { return queue_counts(v, t); };
    auto counts = co_await off_loop(broker::bus_of(*v.broker)->worker_executor(), std::move(count));
    if (!counts || !*counts) co_return error_reply(503, "bus_unavailable", counts ? (*counts).error().text : "no answer");
    for (const auto& [name, def] : t.queues()) {
      auto info = (**counts).find(routing::consumer_name(name));
      const auto* counted = info == (**counts).end() ? nullptr : &info->second;
      items.push_back(queue_json(v.name, a.src().node, t, name, counted, count_of(consumers, name)));
    }
  }
  co_return c.list(std::move(items));
}

handled one_queue(api& a, const call& c) {
  const auto& v = c.v();
  const auto& name = c.arg("name");
  const auto t = broker::topology_of(*v.broker);
  const auto* def = t.find_queue(name);
  if (def == nullptr) co_return not_found();
  const bool stream = def->type() == routing::queue_type::stream;
  auto peek = [v, name, stream] { return queue_count(v, name, stream); };
  auto pool = broker::bus_of(*v.broker)->worker_executor();
  auto info = co_await off_loop(pool, std::move(peek));
  if (!info) co_return error_reply(503, "bus_unavailable", "no answer");
  // A queue whose consumer is still being made is "down" with nothing counted; any other failure
  // is the bus's, said as such.
  if (!*info && (*info).error().kind != bus::bus_errc::not_found)
    co_return error_reply(503, "bus_unavailable", (*info).error().text);
  const bus::queue_info* counted = *info ? &**info : nullptr;
  co_return json_reply(200, queue_json(v.name, a.src().node, t, name, counted, count_of(consumer_counts(*v.broker), name)));
}

// RabbitMQ answers 404 for a queue that is not there: a passive declare asks first.
handled delete_queue(api& a, const call& c) {
  const auto& name = c.arg("name");
  auto ch = co_await a.open_operator(c.v(), c.who);
  if (!ch) co_return refused_vhost();
  wire::queue_declare passive{0, name, true, false, false, false, false, {}};
  auto there = co_await ch->call(std::move(passive), is<wire::queue_declare_ok>);
  if (there.refused || there.timed_out) co_return refused_reply(there, "queue.delete");
  wire::queue_delete_ m{0, name, query_flag(c.r.query, "if-unused"), query_flag(c.r.query, "if-empty"), false};
  auto deleted = co_await ch->call(std::move(m), is<wire::queue_delete_ok>);
  if (deleted.refused || deleted.timed_out) co_return refused_reply(deleted, "queue.delete");
  co_return no_content();
}

handled purge_queue(api& a, const call& c) {
  wire::method m = wire::queue_purge{0, c.arg("name"), false};
  auto answered = co_await a.one_method(c.v(), c.who, std::move(m), is<wire::queue_purge_ok>, no_content());
  co_return answered;
}

handled get_messages(api& a, const call& c) {
  auto asked = get_messages_request(c.r.body);
  if (!asked.value) co_return bad_request(asked.why);
  const auto& how = *asked.value;
  auto ch = co_await a.open_operator(c.v(), c.who);
  if (!ch) co_return refused_vhost();
  json messages = json::array();
  std::vector<std::uint64_t> tags;
  for (std::int64_t i = 0; i < how.count; ++i) {
    wire::basic_get get{0, c.arg("name"), false};
    auto got = co_await ch->call(std::move(get), taken_get);
    if (got.refused || got.timed_out) co_return refused_reply(got, "basic.get");
    const auto* ok = std::get_if<wire::basic_get_ok>(&got.frames.back().method);
    if (!ok) break;
    tags.push_back(ok->delivery_tag);
    messages.push_back(got_message_json(*ok, got.frames.back().property_octets, got.frames.back().body, how));
  }
  // Settled as asked: ack_requeue_true gives them back, in their order (the operator channel's
  // close requeues what it holds).
  for (auto tag : tags) {
    if (how.ackmode == "ack_requeue_false") ch->tell(wire::basic_ack{tag, false});
    if (how.ackmode == "reject_requeue_false") ch->tell(wire::basic_reject{tag, false});
  }
  co_return json_reply(200, messages);
}

}  // namespace amqp::management
