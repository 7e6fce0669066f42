#include "publish/route.hpp"

#include <algorithm>
#include <memory>
#include <set>

#include <boost/asio/post.hpp>

#include "amqp/bus/client.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
#include "broker_state.hpp"

namespace amqp::broker {

publish_plan plan_publish(const broker& b, std::string_view exchange, std::string_view key,
                          const std::vector<std::string>& cc_keys, std::string_view property_octets) {
  return b.read_topology([&](const routing::topology& t) {
    publish_plan plan;
    const auto* found = t.find_exchange(exchange);
    if (found == nullptr) return plan;
    plan.exchange = *found;
    std::set<std::string> reached;
    if (exchange.empty()) {
      if (t.find_queue(key)) {
        reached.emplace(key);
      } else if (routing::publish_subject("", key)) {
        plan.unknown_queue.emplace(key);
      }
    } else {
      for (auto& q : t.queues_reached(exchange, key)) reached.insert(std::move(q));
      if (auto subject = routing::publish_subject(exchange, key)) plan.routed_as = std::move(*subject);
    }
    for (const auto& cc : cc_keys)
      for (auto& q : t.queues_reached(exchange, cc)) reached.insert(std::move(q));
    // A copy reached only through a CC key, by the default exchange, shows the publish's own key.
    if (plan.routed_as.empty() && !cc_keys.empty())
      if (auto subject = routing::publish_subject(exchange, key)) plan.routed_as = std::move(*subject);
    plan.queues.assign(reached.begin(), reached.end());
    if (!t.stream_queues().empty())
      for (const auto& q : plan.queues)
        if (t.stream_queues().contains(q)) plan.streams.push_back(q);
    if (t.has_length_limits()) {
      for (const auto& q : plan.queues) {
        const auto* def = t.find_queue(q);
        if (def && def->max_length)
          plan.limits.push_back({q, *def->max_length, def->overflow.value_or(routing::overflow_mode::drop_head)});
      }
    }
    plan.expiries = expiries_of(t, plan.queues, property_octets);
    return plan;
  });
}

void publish_copies(bus::client& bus, bus::client& adaptor, const boost::asio::any_io_executor& ex,
                    const copy_targets& to, std::string props_b64, std::string body,
                    std::function<void(bus::bus_status)> done, std::string_view msg_id_prefix) {
  const auto& queues = to.queues;
  if (queues.empty()) return boost::asio::post(ex, [done = std::move(done)] { done(bus::bus_ok()); });
  struct answers {
    std::size_t left;
    bus::bus_status first_failure = bus::bus_ok();
    std::function<void(bus::bus_status)> done;
  };
  auto state = std::make_shared<answers>(answers{queues.size(), bus::bus_ok(), std::move(done)});
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const bool last = i + 1 == queues.size();
    auto subject = routing::queue_subject(queues[i]);
    auto answered = [state](bus::bus_status stored) {
      if (!stored && state->first_failure) state->first_failure = stored;
      if (--state->left == 0) state->done(state->first_failure);
    };
    auto msg_id = msg_id_prefix.empty() ? std::string{} : std::string{msg_id_prefix} + routing::name_word(queues[i]);
    auto props = last ? std::move(props_b64) : props_b64;
    auto content = last ? std::move(body) : body;
    if (std::binary_search(to.streams.begin(), to.streams.end(), queues[i])) {
      // Its stream's subject says nothing of the publish: the copy always carries what it named.
      adaptor.publish_to_queue_stream(routing::consumer_name(queues[i]), std::move(msg_id), std::move(props),
                                      std::move(content), to.routed_as.empty() ? subject : to.routed_as, ex,
                                      std::move(answered));
      continue;
    }
    // The copy under its own subject needs no mark: it is what the publish named.
    auto mark = to.routed_as == subject ? std::string{} : to.routed_as;
    if (msg_id.empty()) {
      bus.publish(std::move(subject), std::move(props), std::move(content), std::move(mark), ex, std::move(answered));
    } else {
      bus.publish_identified(std::move(subject), std::move(msg_id), std::move(props), std::move(content),
                             std::move(mark), ex, std::move(answered));
    }
  }
}

}  // namespace amqp::broker
