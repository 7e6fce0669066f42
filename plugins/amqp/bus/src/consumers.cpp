// One durable pull consumer per queue (HIP-1326 §2), configured as raw JetStream API JSON
// because nats.c cannot express MaxAckPending = -1 (DESIGN §5).
#include <algorithm>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

constexpr std::int64_t ack_wait_ns = 5LL * 60 * 1'000'000'000;  // five minutes (HIP-1326 §2)
constexpr int max_waiting_pulls = 4096;  // outstanding pull requests per queue
constexpr int js_deliver_policy_not_updatable = 10012;  // JetStream error code

// A consumer name is one subject token and may not contain these; '~' is kept for the
// holding consumers of replace_queue_consumer.
bool valid_queue_name(const std::string& q) {
  if (q.empty() || q.size() > 255) return false;
  return std::none_of(q.begin(), q.end(), [](char c) {
    return c == '.' || c == '*' || c == '>' || c == '~' || c == ' ' || c == '\t' || c == '\r' || c == '\n' ||
           c == '\0';
  });
}

// The holding consumer of a queue being replaced (replace_queue_consumer). '~' cannot occur in
// a queue name (one subject word of [A-Za-z0-9_-], HIP-1326 §2), so it never names a queue.
constexpr std::string_view holding_suffix = "~hold";
std::string holding_name(const std::string& queue) { return queue + std::string{holding_suffix}; }
bool is_holding_name(const std::string& name) {
  return name.size() > holding_suffix.size() && name.ends_with(holding_suffix);
}

std::string consumer_step(const char* what, const std::string& queue) {
  return std::string{what} + " consumer for queue " + queue;
}

std::vector<std::string> returned_filters(const json& config) {
  std::vector<std::string> out;
  if (auto it = config.find("filter_subjects"); it != config.end() && it->is_array())
    for (const auto& f : *it)
      if (f.is_string()) out.push_back(f.get<std::string>());
  if (auto it = config.find("filter_subject"); it != config.end() && it->is_string() && !it->get<std::string>().empty())
    out.push_back(it->get<std::string>());
  std::sort(out.begin(), out.end());
  return out;
}

std::string describe(const std::vector<std::string>& filters) {
  if (filters.empty()) return "no filter (every message of the stream)";
  std::string out;
  for (const auto& f : filters) out += (out.empty() ? "" : ", ") + f;
  return out;
}

// Where a replacement consumer starts so that nothing the old one still owed is lost: after
// its ack floor; for one that never delivered, after the point it was created at. A consumer
// that delivered but never acked restarts at the stream's first message (redeliveries, which
// the adaptor's exact filter match and AMQP's at-least-once allow; never a loss).
std::uint64_t resume_sequence(const json& info) {
  const json none = json::object();
  const json& floor = info.contains("ack_floor") ? info["ack_floor"] : none;
  const json& delivered = info.contains("delivered") ? info["delivered"] : none;
  const auto acked_stream = floor.value("stream_seq", std::uint64_t{0});
  if (acked_stream > 0) return acked_stream + 1;
  if (delivered.value("consumer_seq", std::uint64_t{0}) == 0) return delivered.value("stream_seq", std::uint64_t{0}) + 1;
  return 1;
}

}  // namespace

bus_status client_impl::reclaim_unacked() {
  if (!options_.reclaim_unacked) return bus_ok();
  const std::string step = "reclaim unacknowledged deliveries";
  auto names = api(step, std::string{"CONSUMER.NAMES."} + stream_name, json::object());
  if (!names) return names.error();
  std::vector<std::string> queues, holds;
  for (const auto& name : names->value("consumers", json::array())) {
    if (!name.is_string()) continue;
    auto consumer = name.get<std::string>();
    (is_holding_name(consumer) ? holds : queues).push_back(std::move(consumer));
  }
  // A replacement that a crash interrupted is finished first: its holding consumer is all
  // that keeps the queue's messages.
  for (const auto& hold : holds)
    if (auto finished = finish_interrupted_replacement(hold, step); !finished) return finished;
  for (const auto& queue : queues) {
    auto info = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
    if (!info) {
      if (info.error().kind == bus_errc::not_found) continue;
      return info.error();
    }
    // Deliveries owed to connections that died with the last process would wait out the
    // five-minute ack wait; a consumer restarted at its ack floor delivers them again now.
    if (info->value("num_ack_pending", std::uint64_t{0}) == 0) continue;
    if (auto replaced = replace_queue_consumer(queue, *info, info->value("config", json::object()), step); !replaced)
      return replaced;
  }
  return bus_ok();
}

// Interest retention drops every message no consumer still owes the moment a consumer is
// deleted (measured on 2.9.10: a queue's ten unacked messages gone with its consumer). So a
// queue's consumer is never deleted bare: a holding consumer with the old filter, starting
// where the old one's unacknowledged messages begin, keeps the interest while the queue's
// consumer is recreated, and is deleted once the new one holds that interest itself.
bus_status client_impl::replace_queue_consumer(const std::string& queue, const json& old_info, json config,
                                               const std::string& step) {
  const auto start = resume_sequence(old_info);
  json hold = old_info.value("config", json::object());
  hold.erase("name");
  hold.erase("opt_start_time");
  hold["durable_name"] = holding_name(queue);
  hold["deliver_policy"] = "by_start_sequence";
  hold["opt_start_seq"] = start;
  auto held = api(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + holding_name(queue),
                  json{{"stream_name", stream_name}, {"config", hold}});
  if (!held) return held.error();
  if (auto deleted = delete_consumer(queue, step); !deleted) return deleted;
  config.erase("name");
  config.erase("opt_start_time");
  config["durable_name"] = queue;
  config["deliver_policy"] = "by_start_sequence";
  config["opt_start_seq"] = start;
  auto created = api(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + queue,
                     json{{"stream_name", stream_name}, {"config", config}});
  if (!created) return created.error();  // the holding consumer stays: the next boot finishes
  return delete_consumer(holding_name(queue), step);
}

// The holding consumer outlived a process: recreate the queue's consumer from it if the
// crash came before that, then let the holding consumer go.
bus_status client_impl::finish_interrupted_replacement(const std::string& hold, const std::string& step) {
  const auto queue = hold.substr(0, hold.size() - holding_suffix.size());
  auto queue_consumer = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
  if (!queue_consumer && queue_consumer.error().kind != bus_errc::not_found) return queue_consumer.error();
  if (!queue_consumer) {
    auto held = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + hold, nullptr);
    if (!held) return held.error().kind == bus_errc::not_found ? bus_ok() : bus_status{held.error()};
    json config = held->value("config", json::object());
    config.erase("name");
    config["durable_name"] = queue;
    auto created = api(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + queue,
                       json{{"stream_name", stream_name}, {"config", config}});
    if (!created) return created.error();
  }
  return delete_consumer(hold, step);
}

bus_status client_impl::delete_consumer(const std::string& name, const std::string& step) {
  auto deleted = api(step, std::string{"CONSUMER.DELETE."} + stream_name + "." + name, nullptr);
  if (!deleted && deleted.error().kind != bus_errc::not_found) return deleted.error();
  return bus_ok();
}

json client_impl::consumer_config(const std::string& queue, const consumer_filters& filters) const {
  json config = {{"durable_name", queue},
                 {"deliver_policy", "new"},
                 {"ack_policy", "explicit"},
                 {"ack_wait", ack_wait_ns},
                 {"max_deliver", -1},
                 {"max_ack_pending", -1},  // prefetch is the channel's, not the queue's (§3)
                 {"max_waiting", max_waiting_pulls},
                 {"replay_policy", "instant"}};
  if (multi_filter_ && filters.exact.size() > 1)
    config["filter_subjects"] = filters.exact;
  else
    config["filter_subject"] = multi_filter_ && filters.exact.size() == 1 ? filters.exact.front() : filters.cover;
  return config;
}

// No silent unfiltered consumer: what the server stored must be exactly what was asked.
bus_status client_impl::check_filters(const std::string& queue, const consumer_filters& filters,
                                      const json& returned) const {
  std::vector<std::string> wanted;
  if (multi_filter_ && !filters.exact.empty())
    wanted = filters.exact;
  else
    wanted = {filters.cover};
  std::sort(wanted.begin(), wanted.end());
  const auto got = returned_filters(returned.value("config", json::object()));
  if (got == wanted) return bus_ok();
  return failure(consumer_step("create", queue),
                 "the bus stored filter " + describe(got) + " where " + describe(wanted) +
                     " was asked; the consumer is not used");
}

bus_status client_impl::ensure_queue_consumer(const std::string& queue, const consumer_filters& filters) {
  const std::string step = consumer_step("create", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word (no '.', '*', '>' or blanks)");
  const bool have_filter = multi_filter_ ? !filters.exact.empty() || !filters.cover.empty() : !filters.cover.empty();
  if (!have_filter) return failure(step, "no filter subject given; a queue consumer without one would read every message");
  // Two replicas may replace the same consumer at once (2.9, below): the loser's create then
  // meets the winner's consumer ("deliver policy can not be updated") and looks again.
  constexpr int attempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto done = ensure_queue_consumer_once(queue, filters, step);
    if (done || attempt == attempts || done.error().js_code != js_deliver_policy_not_updatable) return done;
  }
}

bus_status client_impl::ensure_queue_consumer_once(const std::string& queue, const consumer_filters& filters,
                                                   const std::string& step) {
  json config = consumer_config(queue, filters);
  if (!multi_filter_) {
    // nats-server 2.9 accepts an update of filter_subject, but its pulls then keep skipping
    // messages that match the new filter (measured on 2.9.10: 408 with Nats-Pending-Messages 1).
    // So there a changed filter means a new consumer, resumed where the old one's
    // unacknowledged messages begin; an unchanged one needs no call at all.
    auto existing = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
    if (existing) {
      if (returned_filters(existing->value("config", json::object())) == std::vector<std::string>{filters.cover})
        return bus_ok();
      if (auto replaced = replace_queue_consumer(queue, *existing, config, step); !replaced) return replaced;
      return verify_filters(queue, filters, step);
    } else if (existing.error().kind != bus_errc::not_found) {
      return existing.error();
    }
  }
  const std::string api_subject = std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + queue;
  // The durable create both creates and, when the consumer exists, updates it (filters
  // change on bind/unbind).
  auto created = api(step, api_subject, json{{"stream_name", stream_name}, {"config", config}});
  if (!created) return created.error();
  return verify_filters(queue, filters, step, &*created);
}

// `created` is the create call's answer when there is one; otherwise the server is asked.
bus_status client_impl::verify_filters(const std::string& queue, const consumer_filters& filters,
                                       const std::string& step, const json* created) {
  bus_result<json> asked = json{};
  if (!created) {
    asked = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
    if (!asked) return asked.error();
    created = &*asked;
  }
  if (auto checked = check_filters(queue, filters, *created); !checked) {
    // Never leave a consumer with a wrong filter collecting messages.
    (void)delete_queue_consumer(queue);
    return checked;
  }
  return bus_ok();
}

bus_status client_impl::delete_queue_consumer(const std::string& queue) {
  const std::string step = consumer_step("delete", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word");
  return delete_consumer(queue, step);
}

bus_result<bus::queue_info> client_impl::queue_info(const std::string& queue) {
  const std::string step = consumer_step("inspect", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word");
  auto info = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
  if (!info) return info.error();
  bus::queue_info out;
  out.num_pending = info->value("num_pending", std::uint64_t{0});
  out.num_ack_pending = info->value("num_ack_pending", std::uint64_t{0});
  out.num_waiting = info->value("num_waiting", std::uint64_t{0});
  out.delivered_consumer_seq = info->value("delivered", json::object()).value("consumer_seq", std::uint64_t{0});
  return out;
}

bus_result<std::uint64_t> client_impl::purge_queue(const std::string& queue, const consumer_filters& filters) {
  // The stream is shared by every queue, so purging the stream is not an option: dropping
  // the durable drops this queue's interest (interest retention removes what only it held),
  // and recreating it with DeliverNew starts the queue empty.
  auto info = queue_info(queue);
  if (!info) return info.error();
  if (auto deleted = delete_queue_consumer(queue); !deleted) return deleted.error();
  if (auto created = ensure_queue_consumer(queue, filters); !created) return created.error();
  return info->num_pending;
}

}  // namespace amqp::bus::detail
