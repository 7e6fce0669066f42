// Prometheus's text format with rabbitmq_prometheus's names: aggregated on /metrics (queue
// figures summed over every queue, as that plugin's default), one sample per queue on
// /metrics/per-object; and the adaptor's own, named cloud_amqp_*.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

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
  auto counts = queue_counts(v, t);
  if (!counts) return counts.error();
  auto consumers = consumer_counts(*v.broker);
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

broker::message_counts summed_messages(const std::vector<vhost>& vhosts) {
  broker::message_counts sum;
  for (const auto& v : vhosts) sum += broker::message_counts_of(*v.broker);
  return sum;
}

void counter(exposition& e, const std::string& name, const char* help, const std::string& labels, std::uint64_t value) {
  e.family(name, "counter", help);
  e.sample(name, labels, value);
}

// RabbitMQ's global counters (rabbitmq_global_messages_*), and the same work as its channel counters
// (rabbitmq_channel_*, what Grafana's RabbitMQ-Overview reads): this process's since it started,
// summed over the vhosts. RabbitMQ's channel counters restart with each channel; these never do.
void message_counters(exposition& e, const std::vector<vhost>& vhosts) {
  const auto sum = summed_messages(vhosts);
  const std::pair<const char*, std::uint64_t> global[] = {
      {"received", sum.received},
      {"received_confirm", sum.received_confirm},
      {"confirmed", sum.confirmed},
      {"unroutable_returned", sum.unroutable_returned},
      {"delivered", sum.delivered()},
      {"delivered_consume_manual_ack", sum.delivered_consume_manual_ack},
      {"delivered_consume_auto_ack", sum.delivered_consume_auto_ack},
      {"delivered_get_manual_ack", sum.delivered_get_manual_ack},
      {"delivered_get_auto_ack", sum.delivered_get_auto_ack},
      {"get_empty", sum.get_empty},
      {"redelivered", sum.redelivered},
      {"acknowledged", sum.acknowledged},
  };
  for (const auto& [what, value] : global)
    counter(e, std::string("rabbitmq_global_messages_") + what + "_total",
            "Messages, as RabbitMQ's global counter of this name counts them, since this process started",
            "protocol=\"amqp091\"", value);
  const std::tuple<const char*, const char*, std::uint64_t> channel[] = {
      {"messages_published", "Messages published into an exchange on a channel", sum.received},
      {"messages_confirmed", "Messages published into an exchange and confirmed on the channel", sum.confirmed},
      {"messages_unroutable_returned", "Messages published as mandatory into an exchange and returned to the publisher as unroutable",
       sum.unroutable_returned},
      {"messages_delivered_ack", "Messages delivered to consumers in manual acknowledgement mode",
       sum.delivered_consume_manual_ack},
      {"messages_delivered", "Messages delivered to consumers in automatic acknowledgement mode",
       sum.delivered_consume_auto_ack},
      {"get_ack", "Messages fetched with basic.get in manual acknowledgement mode", sum.delivered_get_manual_ack},
      {"get", "Messages fetched with basic.get in automatic acknowledgement mode", sum.delivered_get_auto_ack},
      {"get_empty", "Times basic.get found no message", sum.get_empty},
      {"messages_redelivered", "Messages redelivered to consumers", sum.redelivered},
      {"messages_acked", "Messages acknowledged by consumers", sum.acknowledged},
  };
  for (const auto& [what, help, value] : channel) counter(e, std::string("rabbitmq_channel_") + what + "_total", help, "", value);
}

// Connections and channels opened and ended, and queues declared, created and deleted (summed over
// the vhosts), since this process started.
void object_counters(exposition& e, const std::vector<vhost>& vhosts, const session_counts& sessions) {
  broker::queue_counts queues;
  for (const auto& v : vhosts) queues += broker::queue_counts_of(*v.broker);
  counter(e, "rabbitmq_connections_opened_total", "Connections opened", "", sessions.connections_opened);
  counter(e, "rabbitmq_connections_closed_total", "Connections closed or terminated", "", sessions.connections_closed);
  counter(e, "rabbitmq_channels_opened_total", "Channels opened", "", sessions.channels_opened);
  counter(e, "rabbitmq_channels_closed_total", "Channels closed", "", sessions.channels_closed);
  counter(e, "rabbitmq_queues_declared_total", "Queues declared", "", queues.declared);
  counter(e, "rabbitmq_queues_created_total", "Queues created", "", queues.created);
  counter(e, "rabbitmq_queues_deleted_total", "Queues deleted", "", queues.deleted);
}

// The `cloud` process's own descriptors and memory (the bus's nats-server is a process of its own).
void process_gauges(exposition& e, std::uint64_t connections) {
  std::uint64_t open_fds = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++open_fds;
  rlimit limit{};
  const std::uint64_t max_fds = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
  std::uint64_t pages = 0, resident = 0;
  std::ifstream statm("/proc/self/statm");
  statm >> pages >> resident;
  const auto page_size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  e.family("rabbitmq_process_open_fds", "gauge", "Open file descriptors");
  e.sample("rabbitmq_process_open_fds", "", open_fds);
  e.family("rabbitmq_process_max_fds", "gauge", "Open file descriptors limit");
  e.sample("rabbitmq_process_max_fds", "", max_fds);
  // Every client socket is a descriptor: the descriptors' limit is the sockets'.
  e.family("rabbitmq_process_open_tcp_sockets", "gauge", "Open TCP sockets");
  e.sample("rabbitmq_process_open_tcp_sockets", "", connections);
  e.family("rabbitmq_process_max_tcp_sockets", "gauge", "Open TCP sockets limit");
  e.sample("rabbitmq_process_max_tcp_sockets", "", max_fds);
  e.family("rabbitmq_process_resident_memory_bytes", "gauge", "Memory used in bytes");
  e.sample("rabbitmq_process_resident_memory_bytes", "", resident * page_size);
}

// Who this node is, and what it holds now.
void node_gauges(exposition& e, const sources& src, const std::vector<connection_view>& conns,
                 const std::vector<queue_sample>& queues) {
  const std::string node = "rabbitmq_node=\"" + label(src.node) + "\"";
  e.family("rabbitmq_identity_info", "gauge", "RabbitMQ node & cluster identity info");
  e.sample("rabbitmq_identity_info",
           node + ",rabbitmq_cluster=\"" + label(src.node) + "\",rabbitmq_cluster_permanent_id=\"" + label(src.node) + "\"",
           1);
  e.family("rabbitmq_build_info", "untyped", "RABBITMQ-SERVER BUILD INFO");
  e.sample("rabbitmq_build_info",
           "rabbitmq_version=\"3.10.8\",product_name=\"cloud\",product_version=\"" + label(src.product_version) + "\"", 1);
  std::uint64_t channels = 0, consumers = 0, unacked = 0;
  for (const auto& c : conns) channels += c.channels;
  for (const auto& q : queues) {
    consumers += q.consumers;
    unacked += q.unacked;
  }
  const std::tuple<const char*, const char*, std::uint64_t> gauges[] = {
      {"rabbitmq_connections", "Connections currently open", conns.size()},
      {"rabbitmq_channels", "Channels currently open", channels},
      {"rabbitmq_queues", "Queues available", queues.size()},
      {"rabbitmq_consumers", "Consumers currently connected", consumers},
      {"rabbitmq_channel_consumers", "Consumers on a channel", consumers},
      {"rabbitmq_channel_messages_unacked", "Delivered but not yet acknowledged", unacked},
  };
  for (const auto& [name, help, value] : gauges) {
    e.family(name, "gauge", help);
    e.sample(name, "", value);
  }
}

// Each queue's figures, summed (rabbitmq_prometheus's default) or one sample per queue.
void queue_gauges(exposition& e, const std::vector<queue_sample>& queues, bool per_object) {
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
}

// The adaptor's own: bus requests made and refusals raised, per vhost.
void adaptor_counters(exposition& e, const std::vector<vhost>& vhosts) {
  e.family("cloud_amqp_bus_requests_total", "counter", "JetStream API and bucket requests made, per vhost");
  for (const auto& v : vhosts)
    e.sample("cloud_amqp_bus_requests_total", "vhost=\"" + label(v.name) + "\"",
             broker::bus_of(*v.broker)->requests_made());
  e.family("cloud_amqp_refusals_total", "counter", "Channel and connection exceptions raised, per vhost and reply code");
  for (const auto& v : vhosts)
    for (const auto& [code, count] : broker::refusals_of(*v.broker))
      e.sample("cloud_amqp_refusals_total", "vhost=\"" + label(v.name) + "\",code=\"" + std::to_string(code) + "\"", count);
}

}  // namespace

net::awaitable<reply> api::metrics(bool per_object) {
  std::vector<queue_sample> queues;
  const auto vhosts = src_.vhosts;
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
  exposition e;
  node_gauges(e, src_, conns, queues);
  queue_gauges(e, queues, per_object);
  message_counters(e, vhosts);
  object_counters(e, vhosts, src_.sessions_counted ? src_.sessions_counted() : session_counts{});
  process_gauges(e, conns.size());
  adaptor_counters(e, vhosts);
  co_return reply{200, e.text(), "text/plain; version=0.0.4", {}, {}};
}

}  // namespace amqp::management
