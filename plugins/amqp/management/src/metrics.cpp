// Prometheus's text format with rabbitmq_prometheus's names: aggregated on /metrics (queue
// figures summed over every queue, as that plugin's default), one sample per queue on
// /metrics/per-object; and the adaptor's own, named cloud_amqp_*.
#include <map>
#include <sstream>

#include "amqp/routing/names.hpp"
#include "api.hpp"
#include "off_loop.hpp"

namespace amqp::management {
namespace {

// A label value, escaped as the text format asks.
std::string label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class exposition {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const std::string& labels, std::uint64_t value) {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value << '\n';
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

struct queue_sample {
  std::string vhost;
  std::string queue;
  std::uint64_t ready = 0;
  std::uint64_t unacked = 0;
  std::uint32_t consumers = 0;
};

// Blocking, on the bus pool: every queue of one vhost with its counts.
bus::bus_result<std::vector<queue_sample>> sample_vhost(const vhost& v) {
  std::vector<queue_sample> out;
  const auto t = broker::topology_of(*v.broker);
  auto counts = broker::bus_of(*v.broker)->peek_all_queues();
  if (!counts) return counts.error();
  std::map<std::string, std::uint32_t> consumers;
  for (const auto& c : broker::consumers_of(*v.broker)) ++consumers[c.queue];
  for (const auto& [name, def] : t.queues()) {
    queue_sample q{v.name, name, 0, 0, consumers[name]};
    if (auto it = counts->find(routing::consumer_name(name)); it != counts->end()) {
      q.ready = it->second.ready();
      q.unacked = it->second.held_here;
    }  // else its consumer is still being made: nothing stored for it yet
    out.push_back(std::move(q));
  }
  return out;
}

// RabbitMQ's global counters, summed over the vhosts (rabbitmq_global_messages_*).
void global_counters(exposition& e, const std::vector<vhost>& vhosts) {
  broker::message_counts sum;
  for (const auto& v : vhosts) {
    const auto c = broker::message_counts_of(*v.broker);
    sum.received += c.received;
    sum.received_confirm += c.received_confirm;
    sum.confirmed += c.confirmed;
    sum.unroutable_returned += c.unroutable_returned;
    sum.delivered_consume_manual_ack += c.delivered_consume_manual_ack;
    sum.delivered_consume_auto_ack += c.delivered_consume_auto_ack;
    sum.delivered_get_manual_ack += c.delivered_get_manual_ack;
    sum.delivered_get_auto_ack += c.delivered_get_auto_ack;
    sum.get_empty += c.get_empty;
    sum.redelivered += c.redelivered;
    sum.acknowledged += c.acknowledged;
  }
  const std::uint64_t delivered = sum.delivered_consume_manual_ack + sum.delivered_consume_auto_ack +
                                  sum.delivered_get_manual_ack + sum.delivered_get_auto_ack;
  const std::pair<const char*, std::uint64_t> counters[] = {
      {"received", sum.received},
      {"received_confirm", sum.received_confirm},
      {"confirmed", sum.confirmed},
      {"unroutable_returned", sum.unroutable_returned},
      {"delivered", delivered},
      {"delivered_consume_manual_ack", sum.delivered_consume_manual_ack},
      {"delivered_consume_auto_ack", sum.delivered_consume_auto_ack},
      {"delivered_get_manual_ack", sum.delivered_get_manual_ack},
      {"delivered_get_auto_ack", sum.delivered_get_auto_ack},
      {"get_empty", sum.get_empty},
      {"redelivered", sum.redelivered},
      {"acknowledged", sum.acknowledged},
  };
  for (const auto& [what, value] : counters) {
    const std::string name = std::string("rabbitmq_global_messages_") + what + "_total";
    e.family(name, "counter", "Messages, as RabbitMQ's global counter of this name counts them, since this process started");
    e.sample(name, "protocol=\"amqp091\"", value);
  }
}

}  // namespace

net::awaitable<reply> api::metrics(bool per_object) {
  std::vector<queue_sample> queues;
  const auto vhosts = all_vhosts();
  for (const auto& v : vhosts) {
    auto sample = [&v] { return sample_vhost(v); };
    auto pool = broker::bus_of(*v.broker)->worker_executor();
    auto got = co_await off_loop(pool, std::move(sample));
    // A figure the bus could not give is no figure: the scrape fails, and Prometheus says so.
    if (!got || !*got)
      co_return reply{503, "the bus did not give vhost '" + v.name + "''s counts: " + (got ? got->error().text : "no answer") + "\n",
                      "text/plain; version=0.0.4", {}, {}};
    queues.insert(queues.end(), std::make_move_iterator((*got)->begin()), std::make_move_iterator((*got)->end()));
  }
  const auto conns = src_.connections ? src_.connections() : std::vector<connection_view>{};
  std::uint64_t channels = 0;
  for (const auto& c : conns) channels += c.channels;

  exposition e;
  const std::string node = "rabbitmq_node=\"" + label(src_.node) + "\"";
  e.family("rabbitmq_identity_info", "gauge", "RabbitMQ node & cluster identity info");
  e.sample("rabbitmq_identity_info",
           node + ",rabbitmq_cluster=\"" + label(src_.node) + "\",rabbitmq_cluster_permanent_id=\"" + label(src_.node) + "\"",
           1);
  e.family("rabbitmq_build_info", "untyped", "RABBITMQ-SERVER BUILD INFO");
  e.sample("rabbitmq_build_info",
           "rabbitmq_version=\"3.10.8\",product_name=\"cloud\",product_version=\"" + label(src_.product_version) + "\"", 1);
  e.family("rabbitmq_connections", "gauge", "Connections currently open");
  e.sample("rabbitmq_connections", "", conns.size());
  e.family("rabbitmq_channels", "gauge", "Channels currently open");
  e.sample("rabbitmq_channels", "", channels);
  e.family("rabbitmq_queues", "gauge", "Queues available");
  e.sample("rabbitmq_queues", "", queues.size());
  std::uint64_t consumers = 0;
  for (const auto& q : queues) consumers += q.consumers;
  e.family("rabbitmq_consumers", "gauge", "Consumers currently connected");
  e.sample("rabbitmq_consumers", "", consumers);

  struct family_of {
    const char* name;
    const char* help;
    std::uint64_t (*value)(const queue_sample&);
  };
  const family_of families[] = {
      {"rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers",
       [](const queue_sample& q) { return q.ready; }},
      {"rabbitmq_queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged",
       [](const queue_sample& q) { return q.unacked; }},
      {"rabbitmq_queue_messages", "Sum of ready and unacknowledged messages - total queue depth",
       [](const queue_sample& q) { return q.ready + q.unacked; }},
      {"rabbitmq_queue_consumers", "Consumers on a queue", [](const queue_sample& q) -> std::uint64_t { return q.consumers; }},
  };
  for (const auto& f : families) {
    e.family(f.name, "gauge", f.help);
    if (per_object) {
      for (const auto& q : queues)
        e.sample(f.name, "vhost=\"" + label(q.vhost) + "\",queue=\"" + label(q.queue) + "\"", f.value(q));
    } else {
      std::uint64_t sum = 0;
      for (const auto& q : queues) sum += f.value(q);
      e.sample(f.name, "", sum);
    }
  }

  global_counters(e, vhosts);
  e.family("cloud_amqp_bus_requests_total", "counter", "JetStream API and bucket requests made, per vhost");
  for (const auto& v : vhosts)
    e.sample("cloud_amqp_bus_requests_total", "vhost=\"" + label(v.name) + "\"",
             broker::bus_of(*v.broker)->requests_made());
  e.family("cloud_amqp_refusals_total", "counter", "Channel and connection exceptions raised, per vhost and reply code");
  for (const auto& v : vhosts)
    for (const auto& [code, count] : broker::refusals_of(*v.broker))
      e.sample("cloud_amqp_refusals_total", "vhost=\"" + label(v.name) + "\",code=\"" + std::to_string(code) + "\"", count);
  co_return reply{200, e.text(), "text/plain; version=0.0.4", {}, {}};
}

}  // namespace amqp::management
