// The management API's dispatch: a request's row in the route table, the path's vhost checked as
// the row needs, then the row's handler. Reads come from the vhosts' topology mirrors and the bus's
// counts; writes go through an operator channel (operator_channel.hpp) as AMQP methods, so they are
// refused as a client's would be.
#include "api.hpp"

#include <algorithm>
#include <optional>

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "handlers.hpp"
#include "off_loop.hpp"
#include "routes.hpp"

namespace amqp::management {
namespace {

constexpr std::chrono::seconds operator_timeout{30};

// A queue's unacknowledged messages are what this process's clients hold: the bus counted those of
// the vhost's own client only.
void count_held(const std::map<std::string, std::uint64_t>& held, const std::string& consumer, bus::queue_info& info) {
  auto it = held.find(consumer);
  info.held_here = it == held.end() ? 0 : it->second;
}

}  // namespace

bus::bus_result<std::map<std::string, bus::queue_info>> queue_counts(const vhost& v, const routing::topology& t) {
  auto bus = broker::bus_of(*v.broker);
  auto all = bus->peek_all_queues();
  if (!all) return all;
  const auto held = broker::held_of(*v.broker);
  std::optional<std::map<std::string, std::uint64_t>> stored;  // asked once, if some queue was never read
  for (const auto& [queue, def] : t.queues()) {
    const auto consumer = routing::consumer_name(queue);
    if (def.type() == routing::queue_type::stream) {
      if (auto state = bus->queue_stream_state(consumer)) (*all)[consumer] = bus::queue_info{state->messages};
    } else if (auto it = all->find(consumer); it != all->end()) {
      count_held(held, consumer, it->second);
    } else if (bus->retains_by_limits()) {
      if (!stored) {
        auto per_subject = bus->stored_per_subject(routing::queue_subjects());
        if (!per_subject) return per_subject.error();
        stored = std::move(*per_subject);
      }
      auto found = stored->find(routing::queue_subject(queue));
      (*all)[consumer] = bus::queue_info{found == stored->end() ? 0 : found->second};
    }
  }
  return all;
}

bus::bus_result<bus::queue_info> queue_count(const vhost& v, const std::string& queue, bool stream) {
  auto bus = broker::bus_of(*v.broker);
  const auto consumer = routing::consumer_name(queue);
  if (stream) {
    auto held = bus->queue_stream_state(consumer);
    if (!held) return held.error();
    return bus::queue_info{held->messages};
  }
  auto info = bus::queue_counts(*bus, consumer, routing::queue_subject(queue), true);
  if (info) count_held(broker::held_of(*v.broker), consumer, *info);
  return info;
}

std::map<std::string, std::uint32_t> consumer_counts(const broker::broker& b) {
  std::map<std::string, std::uint32_t> counts;
  for (const auto& c : broker::consumers_of(b)) ++counts[c.queue];
  return counts;
}

reply call::list(nlohmann::json items) const {
  auto shaped = shape_list(std::move(items), r.query);
  return shaped.bad_request ? bad_request(*shaped.bad_request) : json_reply(200, shaped.body);
}

api::api(const sources& src, net::any_io_executor ex) : src_(src), ex_(std::move(ex)) {}

// Copies: a request keeps its vhosts' brokers while it runs, whatever happens to the service.
std::optional<vhost> api::find(const std::string& name) const {
  for (const auto& v : src_.vhosts)
    if (v.name == name) return v;
  return std::nullopt;
}

net::awaitable<std::vector<vhost>> api::permitted(const principal& who) {
  auto ask = [&who, all = src_.vhosts] {
    std::vector<vhost> allowed;
    for (const auto& v : all)
      if (who.client_for(v.name)) allowed.push_back(v);
    return allowed;
  };
  auto pool = broker::bus_of(*src_.vhosts.front().broker)->worker_executor();
  auto allowed = co_await off_loop(pool, std::move(ask));
  co_return allowed ? std::move(*allowed) : std::vector<vhost>{};
}

net::awaitable<bool> api::may_use(const vhost& v, const principal& who) {
  auto ask = [&who, name = v.name] { return who.client_for(name) != nullptr; };
  auto pool = broker::bus_of(*v.broker)->worker_executor();
  auto may = co_await off_loop(pool, std::move(ask));
  co_return may && *may;
}

// A request's bug is its own 500, named, and the connection stays (RabbitMQ's shape).
net::awaitable<reply> api::answer(request r, const principal& who) {
  std::string failure;
  try {
    const auto m = match(r.method, r.path);
    if (!m.row) co_return refusal(m);
    auto answered = co_await dispatch(m, r, who);
    co_return answered;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (src_.log) src_.log("management: " + r.method + " failed: " + failure);
  co_return error_reply(500, "internal_server_error", failure);
}

// The vhosts the row works in: a read the user's (or the path's one of them), a write the path's.
net::awaitable<reply> api::dispatch(const matched& m, const request& r, const principal& who) {
  const auto& row = *m.row;
  call c{r, who, m.args, {}};
  const auto* named = m.args.find("vhost");
  const auto v = named ? find(*named) : std::nullopt;
  if (row.needs == permission::read) {
    auto allowed = co_await permitted(who);
    for (auto& each : allowed)
      if (!named || each.name == *named) c.in.push_back(std::move(each));
  } else if (v) {
    bool may = true;  // a co_await of its own: g++ 12 miscompiles one inside a condition
    if (row.needs == permission::write) may = co_await may_use(*v, who);
    if (may) c.in.push_back(*v);
  }
  if (named) {
    if (auto refused = vhost_refusal(row.needs, v.has_value(), !c.in.empty())) co_return std::move(*refused);
  }
  auto answered = co_await row.answer(*this, c);
  co_return answered;
}

net::awaitable<std::shared_ptr<operator_channel>> api::open_operator(const vhost& v, const principal& who) {
  auto sign_in = [&who, name = v.name] { return who.client_for(name); };
  auto pool = broker::bus_of(*v.broker)->worker_executor();
  auto client = co_await off_loop(pool, std::move(sign_in));
  if (!client || !*client) co_return nullptr;
  co_return std::make_shared<operator_channel>(v.broker, *client, ex_, next_operator_++ | (1ULL << 62), who.user,
                                               operator_timeout);
}

net::awaitable<reply> api::one_method(const vhost& v, const principal& who, wire::method m,
                                      operator_channel::done_fn done, reply success) {
  const auto what = std::string(wire::info_of(m).name);
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  auto a = co_await ch->call(std::move(m), std::move(done));
  if (a.refused || a.timed_out) co_return refused_reply(a, what);
  co_return success;
}

nlohmann::json api::connections_in(const std::vector<vhost>& in) const {
  auto items = nlohmann::json::array();
  if (!src_.connections) return items;
  for (const auto& c : src_.connections())
    if (std::any_of(in.begin(), in.end(), [&](const vhost& v) { return v.name == c.vhost; }))
      items.push_back(connection_json(c, src_.node));
  return items;
}

void api::sample_counters() {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& v : src_.vhosts) {
    counter_sample newest{now, broker::message_counts_of(*v.broker)};
    auto [it, first] = samples_.try_emplace(v.name, newest, newest);
    if (!first) it->second = {it->second.second, newest};
  }
}

nlohmann::json api::message_stats(const std::vector<vhost>& in) const {
  std::vector<vhost_counters> counters;
  for (const auto& v : in) {
    auto it = samples_.find(v.name);
    counters.push_back({broker::message_counts_of(*v.broker), it == samples_.end() ? nullptr : &it->second});
  }
  return management::message_stats(counters);
}

}  // namespace amqp::management
