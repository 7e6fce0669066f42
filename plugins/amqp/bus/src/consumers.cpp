// One durable pull consumer per queue (HIP-1326, "Exchanges, queues and bindings become subjects,
// consumers and filters") whose filter_subjects are the queue's bindings, updated in place;
// configured as raw JetStream API JSON because nats.c cannot express MaxAckPending = -1. And the
// boot-time reclaim of a dead process's deliveries.
#include <algorithm>
#include <ctime>
#include <limits>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// Outstanding pull requests per queue: a few per AMQP consumer (they pipeline), plus the gets.
// Fixed at creation (nats-server refuses to update it).
constexpr int max_waiting_pulls = 4096;

// A consumer name is one subject token.
bool valid_queue_name(const std::string& q) {
  if (q.empty() || q.size() > 255) return false;
  return std::none_of(q.begin(), q.end(), [](char c) {
    return c == '.' || c == '*' || c == '>' || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\0';
  });
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

std::uint64_t seq_of(const json& info, const char* which, const char* field) {
  auto it = info.find(which);
  return it != info.end() && it->is_object() ? it->value(field, std::uint64_t{0}) : 0;
}

// An RFC 3339 time as the server writes it ("2026-12-01T17:21:05.461459242Z", always UTC), in
// milliseconds since the epoch; 0 when it is not one.
std::uint64_t epoch_ms(const std::string& text) {
  std::tm tm{};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return 0;
  const std::time_t seconds = ::timegm(&tm);
  if (seconds < 0) return 0;
  std::uint64_t ms = static_cast<std::uint64_t>(seconds) * 1000;
  if (*rest == '.') {
    std::uint64_t scale = 100;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, scale /= 10) ms += static_cast<std::uint64_t>(*rest - '0') * scale;
  }
  return ms;
}

std::uint64_t last_active_of(const json& info, const char* which) {
  auto it = info.find(which);
  if (it == info.end() || !it->is_object()) return 0;
  return epoch_ms(it->value("last_active", std::string{}));
}

}  // namespace

json client_impl::consumer_config(const std::string& queue, const std::vector<std::string>& filters,
                                  queue_sharing sharing, const char* deliver_policy) const {
  json config{{"durable_name", queue},
              {"deliver_policy", deliver_policy},
              {"ack_policy", "explicit"},
              {"ack_wait", std::chrono::nanoseconds(options_.ack_wait).count()},
              {"max_deliver", -1},
              // Prefetch is the channel's, not the queue's (HIP-1326, "Acknowledgement, and what
              // bounds a consumer").
              {"max_ack_pending", -1},
              {"max_waiting", max_waiting_pulls},
              {"replay_policy", "instant"},
              {"filter_subjects", filters}};
  config["priority_groups"] = {priority_group};
  if (sharing == queue_sharing::single_active) {
    config["priority_policy"] = "pinned_client";
    config["priority_timeout"] = std::chrono::nanoseconds(pin_timeout).count();
  } else {
    // RabbitMQ's consumer priorities: the server keeps the waiting requests sorted by their
    // level and serves the first, equal levels in turn (waitQueue.addPrioritized, popAndRequeue).
    config["priority_policy"] = "prioritized";
  }
  return config;
}

bus_result<json> client_impl::create_queue_consumer(const std::string& step, const std::string& queue,
                                                   const std::vector<std::string>& filters, queue_sharing sharing,
                                                   const char* deliver_policy) {
  return api(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + queue,
             json{{"stream_name", stream_name}, {"config", consumer_config(queue, filters, sharing, deliver_policy)}});
}

bus_status client_impl::ensure_queue_consumer(const std::string& queue, const std::vector<std::string>& filters,
                                              queue_sharing sharing) {
  const std::string step = consumer_step("create", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word (no '.', '*', '>' or blanks)");
  if (filters.empty()) return failure(step, "no filter subject given; a queue consumer without one would read every message");
  // The durable create both creates and, when the consumer exists, updates it in place (an
  // upgraded store's filters are narrowed). A queue's subject holds only its own messages, so the
  // consumer starts at the first: a new leader without state picks its start from its own copy
  // of the stream, and "new" there skipped what the queue was sent (RELIABILITY finding 10). A
  // consumer an earlier release made keeps "new", which the server does not let change.
  auto created = create_queue_consumer(step, queue, filters, sharing, "all");
  if (!created && created.error().text.find("deliver policy can not be updated") != std::string::npos)
    created = create_queue_consumer(step, queue, filters, sharing, "new");
  if (!created) return created.error();
  const json config = created->value("config", json::object());
  auto wanted = filters;
  std::sort(wanted.begin(), wanted.end());
  const auto got = returned_filters(config);
  if (got == wanted) return bus_ok();
  // Another replica's update of the same queue landed in between (or the server ignored what
  // it was asked): the caller re-reads the bindings and asks again. The consumer is left as it
  // is: deleting it would drop what only it holds.
  return failure(step, "the bus stored filter " + describe(got) + " where " + describe(wanted) + " was asked",
                 bus_errc::conflict);
}

bus_status client_impl::delete_queue_consumer(const std::string& queue) {
  const std::string step = consumer_step("delete", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word");
  auto deleted = api(step, std::string{"CONSUMER.DELETE."} + stream_name + "." + queue, nullptr);
  if (!deleted && deleted.error().kind != bus_errc::not_found) return deleted.error();
  return bus_ok();
}

namespace {

// Queue consumers are the stream's durable ones with no inactive threshold; each client's count
// probe has one. The adaptor's own ('~…': count probes, the delayed holder) are no queues.
bool is_queue_consumer(const json& config) {
  const auto name = config.value("durable_name", std::string{});
  return !name.empty() && !name.starts_with('~') && config.value("inactive_threshold", std::int64_t{0}) == 0;
}

}  // namespace

// A consumer made before consumer priorities has no priority policy: it serves the pull requests
// in arrival order, ignoring their level (processNextMsgRequest checks the group only on a
// consumer that has a policy), until it is converged.
bus_result<std::vector<std::string>> client_impl::queues_to_converge() {
  const auto wanted = std::chrono::nanoseconds(options_.ack_wait).count();
  std::vector<std::string> out;
  auto listed = for_each_consumer("list the queues' consumers", [&](const json& info) {
    const json config = info.value("config", json::object());
    const auto policy = config.value("priority_policy", std::string{"none"});
    if (is_queue_consumer(config) && (config.value("ack_wait", std::int64_t{0}) != wanted || policy == "none"))
      out.push_back(config.value("durable_name", std::string{}));
    return bus_ok();
  });
  if (!listed) return listed.error();
  return out;
}

bus_result<std::map<std::string, std::vector<std::string>>> client_impl::queue_consumer_filters() {
  std::map<std::string, std::vector<std::string>> out;
  auto listed = for_each_consumer("list the queues' consumers", [&](const json& info) {
    const json config = info.value("config", json::object());
    if (is_queue_consumer(config)) out.emplace(config.value("durable_name", std::string{}), returned_filters(config));
    return bus_ok();
  });
  if (!listed) return listed.error();
  return out;
}

// Stream AMQP's consumers, a page of infos (up to 256) per request: one request per consumer
// made a boot with 5,000 queues wait seconds.
bus_status client_impl::for_each_consumer(const std::string& step, const std::function<bus_status(const json&)>& each) {
  for (std::uint64_t offset = 0;;) {
    auto page = api(step, std::string{"CONSUMER.LIST."} + stream_name, json{{"offset", offset}});
    if (!page) return page.error();
    const json infos = page->value("consumers", json::array());
    for (const auto& info : infos)
      if (auto done = each(info); !done) return done;
    offset += infos.size();
    if (infos.empty() || offset >= page->value("total", std::uint64_t{0})) return bus_ok();
  }
}

bus_result<bus::queue_info> client_impl::queue_info(const std::string& queue) {
  const std::string step = consumer_step("inspect", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word");
  if (auto caught_up = catch_up_with_publishes(step); !caught_up) return caught_up.error();
  std::uint64_t held_then = 0;
  if (auto synced = sync_settlements(queue, step, &held_then); !synced) return synced.error();
  auto counts = counts_of(queue, step);
  // A delivery settled after the sync decided may be neither held now nor settled in the counts;
  // one that arrived meanwhile is held now and counted delivered: either way it is not ready.
  if (counts) counts->held_here = std::max(counts->held_here, held_then);
  return counts;
}

bus_result<bus::queue_info> client_impl::peek_queue(const std::string& queue) {
  const std::string step = consumer_step("inspect", queue);
  if (!valid_queue_name(queue)) return failure(step, "a queue name must be one subject word");
  return counts_of(queue, step);
}

bus_result<bus::queue_info> client_impl::counts_of(const std::string& queue, const std::string& step) {
  auto info = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
  if (!info) return info.error();
  return queue_info_of(*info);
}

// A consumer's info (CONSUMER.INFO, or one of CONSUMER.LIST's) as queue_info reports it.
bus::queue_info client_impl::queue_info_of(const json& info) const {
  bus::queue_info out;
  out.num_pending = info.value("num_pending", std::uint64_t{0});
  out.num_ack_pending = info.value("num_ack_pending", std::uint64_t{0});
  out.num_waiting = info.value("num_waiting", std::uint64_t{0});
  out.delivered_consumer_seq = seq_of(info, "delivered", "consumer_seq");
  out.delivered_stream_seq = seq_of(info, "delivered", "stream_seq");
  out.ack_floor_stream_seq = seq_of(info, "ack_floor", "stream_seq");
  out.last_active_ms = std::max({epoch_ms(info.value("created", std::string{})), last_active_of(info, "delivered"),
                                 last_active_of(info, "ack_floor")});
  out.held_here = held(info.value("name", std::string{}));
  out.filters = returned_filters(info.value("config", json::object()));
  return out;
}

bus_result<std::map<std::string, bus::queue_info>> client_impl::peek_all_queues() {
  std::map<std::string, bus::queue_info> out;
  auto listed = for_each_consumer("list the queues' consumers", [&](const json& info) {
    out.emplace(info.value("name", std::string{}), queue_info_of(info));
    return bus_ok();
  });
  if (!listed) return listed.error();
  return out;
}

bool client_impl::forget_dead_requests(const std::string& queue) {
  return api(consumer_step("inspect", queue), std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr).ok();
}

bus_status client_impl::purge_queue(const std::string& queue, const std::vector<std::string>& filters,
                                    queue_sharing sharing) {
  // An upgraded queue's filters still share subjects with other queues, so purging them is not
  // an option: dropping the durable drops this queue's interest (interest retention removes what
  // only it held), and recreating it with DeliverNew starts the queue empty.
  if (auto deleted = delete_queue_consumer(queue); !deleted) return deleted;
  auto created = create_queue_consumer(consumer_step("create", queue), queue, filters, sharing, "new");
  if (!created) return created.error();
  return bus_ok();
}

bus_status client_impl::purge_subject(const std::string& subject) {
  auto purged = api("drop the messages on " + subject, std::string{"STREAM.PURGE."} + stream_name,
                    json{{"filter", subject}});
  if (!purged) return purged.error();
  return bus_ok();
}

bus_status client_impl::purge_subject_below(const std::string& subject, std::uint64_t below) {
  if (below <= 1) return bus_ok();  // nothing below the first sequence
  auto purged = api("drop the settled messages on " + subject, std::string{"STREAM.PURGE."} + stream_name,
                    json{{"filter", subject}, {"seq", below}});
  if (!purged) return purged.error();
  return bus_ok();
}

bus_result<std::map<std::string, std::uint64_t>> client_impl::stored_per_subject(const std::string& filter) {
  const std::string step = "count the messages on " + filter;
  std::map<std::string, std::uint64_t> out;
  for (std::uint64_t offset = 0;;) {
    auto page = api(step, std::string{"STREAM.INFO."} + stream_name, json{{"subjects_filter", filter}, {"offset", offset}});
    if (!page) return page.error();
    const json subjects = page->value("state", json::object()).value("subjects", json::object());
    for (const auto& [subject, count] : subjects.items())
      if (count.is_number_unsigned()) out.emplace(subject, count.get<std::uint64_t>());
    offset += subjects.size();
    if (subjects.empty() || offset >= page->value("total", std::uint64_t{0})) return out;
  }
}

bus_result<std::uint64_t> client_impl::last_sequence() {
  auto info = api("read the stream's last sequence", std::string{"STREAM.INFO."} + stream_name, nullptr);
  if (!info) return info.error();
  return info->value("state", json::object()).value("last_seq", std::uint64_t{0});
}

bus_result<std::optional<stored_message>> client_impl::next_message(std::uint64_t from,
                                                                   const std::vector<std::string>& filters) {
  return next_stored(from, filters, "read the stream");
}

bus_result<delivery> client_impl::read_message(std::uint64_t seq) {
  const std::string step = "read message " + std::to_string(seq) + " of stream " + stream_name;
  natsMsg* raw = nullptr;
  jsErrCode js_code = static_cast<jsErrCode>(0);
  if (natsStatus s = js_GetMsg(&raw, js_.get(), stream_name, seq, nullptr, &js_code); s != NATS_OK)
    return nats_failure(step, s, js_code);
  msg_ptr msg{raw};
  delivery d;
  read_content(msg.get(), d);
  d.stream_seq = natsMsg_GetSequence(msg.get());
  const std::int64_t stored = natsMsg_GetTime(msg.get());
  d.stored_ns = stored > 0 ? static_cast<std::uint64_t>(stored) : 0;
  return d;
}

// ---- reclaim at boot ------------------------------------------------------------------------
//
// Deliveries still awaiting an ack when the embedded bus starts belong to connections that died
// with the previous process. Left alone, each would come back only when its ack wait ran out;
// RabbitMQ requeues them at once. JetStream does not list a consumer's pending
// sequences, but they lie between its ack floor and its last delivery, among the stream's
// messages that match its filters: each of those is NAK'ed, in stream order (the order the
// server will redeliver them in), and one that is not pending is ignored by the server.

bus_status client_impl::reclaim_unacked() {
  if (!options_.reclaim_unacked) return bus_ok();
  const std::string step = "reclaim unacknowledged deliveries";
  return for_each_consumer(step, [&](const json& info) { return reclaim_queue(info, step); });
}

bus_status client_impl::reclaim_queue(const json& info, const std::string& step) {
  if (info.value("num_ack_pending", std::uint64_t{0}) == 0) return bus_ok();
  const auto queue = info.value("name", std::string{});
  const auto filters = returned_filters(info.value("config", json::object()));
  const auto last = seq_of(info, "delivered", "stream_seq");
  // The server takes a NAK whose consumer sequence lies between its ack floor and its last
  // delivery; the pending entry itself is found by the stream sequence.
  const std::string consumer_seq = std::to_string(seq_of(info, "delivered", "consumer_seq"));
  const std::string prefix = std::string{"$JS.ACK."} + stream_name + "." + queue + ".1.";
  for (auto from = seq_of(info, "ack_floor", "stream_seq") + 1; from <= last;) {
    auto next = next_stored(from, filters, step);
    if (!next) return next.error();
    if (!*next || (*next)->seq > last) break;
    const std::string ack = prefix + std::to_string((*next)->seq) + "." + consumer_seq + ".0.0";
    if (natsStatus s = natsConnection_PublishString(conn_.get(), ack.c_str(), "-NAK"); s != NATS_OK)
      return nats_failure(step + " of queue " + queue, s);
    from = (*next)->seq + 1;
  }
  held_.mark_unsynced(queue);
  return sync_settlements(queue, step + " of queue " + queue);
}

// The first message stored at or after `from` whose subject matches one of the filters.
bus_result<std::optional<stored_message>> client_impl::next_stored(std::uint64_t from,
                                                                   const std::vector<std::string>& filters,
                                                                   const std::string& step) {
  std::optional<stored_message> first;
  for (const auto& filter : filters) {
    auto found = api(step, std::string{"STREAM.MSG.GET."} + stream_name, json{{"seq", from}, {"next_by_subj", filter}});
    if (!found) {
      if (found.error().kind == bus_errc::not_found) continue;  // 10037: none at or after `from`
      return found.error();
    }
    const json message = found->value("message", json::object());
    const auto seq = message.value("seq", std::uint64_t{0});
    if (seq != 0 && (!first || seq < first->seq)) first = stored_message{seq, message.value("subject", std::string{})};
  }
  return first;
}

}  // namespace amqp::bus::detail

namespace amqp::bus {

bus_result<queue_info> queue_counts(client& bus, const std::string& consumer, const std::string& subject, bool peek) {
  auto info = peek ? bus.peek_queue(consumer) : bus.queue_info(consumer);
  if (info || info.error().kind != bus_errc::not_found || !bus.retains_by_limits()) return info;
  auto stored = bus.stored_per_subject(subject);
  if (!stored) return stored.error();
  queue_info out;
  if (auto it = stored->find(subject); it != stored->end()) out.num_pending = it->second;
  return out;
}

}  // namespace amqp::bus
