// Stream queues (x-queue-type stream): each has a JetStream stream of its own, fed from its queue
// consumer on stream AMQP by the broker, and read by consumers of their own there (ack policy
// none), so that any number of readers see the same messages without taking them away.
#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// A reader of a process that died is deleted by the server after this long without a pull
// request (deleteNotActive: the last request's time, then any request still listed). A live one
// asks every 30 s while it has credit; one whose client holds its whole prefetch asks nothing, so
// the bound is long: an hour of holding every delivery unacked.
constexpr std::chrono::seconds reader_inactive_threshold{3600};

std::string stream_step(const char* what, const std::string& queue) {
  return std::string{what} + " stream " + queue_stream_name(queue) + " of stream queue " + queue;
}

}  // namespace

bus_status client_impl::ensure_queue_stream(const std::string& queue, const stream_limits& limits) {
  const std::string step = stream_step("create", queue);
  const std::string name = queue_stream_name(queue);
  json config = {{"name", name},
                 {"subjects", {queue_stream_subject(queue)}},
                 {"retention", "limits"},
                 {"storage", "file"},
                 {"discard", "old"},
                 {"num_replicas", replicas_},
                 {"max_bytes", limits.max_bytes <= 0 ? std::int64_t{-1} : limits.max_bytes},
                 {"max_age", limits.max_age_seconds * ns_per_second}};
  // A copy made again after its feeder died comes after the durable's ack wait; the server's
  // default duplicate window (2 min, or max_age when shorter) covers an ack wait up to a minute
  // less, a longer one is given its own (never beyond max_age, which the server refuses).
  const auto window = options_.ack_wait + std::chrono::seconds(60);
  if (window > std::chrono::minutes(2) &&
      (limits.max_age_seconds == 0 || window.count() <= limits.max_age_seconds))
    config["duplicate_window"] = std::chrono::nanoseconds(window).count();
  auto created = api(step, "STREAM.CREATE." + name, config);
  if (created) return bus_ok();
  // 10058: a stream of that name exists with another config; it is given this one.
  if (created.error().js_code != 10058) return created.error();
  auto updated = api(step, "STREAM.UPDATE." + name, config);
  if (!updated) return updated.error();
  return bus_ok();
}

bus_status client_impl::delete_queue_stream(const std::string& queue) {
  auto deleted = api(stream_step("delete", queue), "STREAM.DELETE." + queue_stream_name(queue), nullptr);
  if (!deleted && deleted.error().kind != bus_errc::not_found) return deleted.error();
  return bus_ok();
}

bus_result<stream_state> client_impl::queue_stream_state(const std::string& queue) {
  auto info = api(stream_step("inspect", queue), "STREAM.INFO." + queue_stream_name(queue), nullptr);
  if (!info) return info.error();
  const json state = info->value("state", json::object());
  return stream_state{state.value("messages", std::uint64_t{0}), state.value("first_seq", std::uint64_t{0}),
                      state.value("last_seq", std::uint64_t{0})};
}

void client_impl::publish_to_queue_stream(const std::string& queue, std::string msg_id, std::string amqp_props_b64,
                                          std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                                          std::function<void(bus_status)> done) {
  if (msg_id.empty()) {
    return publish(queue_stream_subject(queue), std::move(amqp_props_b64), std::move(body), std::move(routed_as),
                   std::move(ex), std::move(done));
  }
  publish_identified(queue_stream_subject(queue), std::move(msg_id), std::move(amqp_props_b64), std::move(body),
                     std::move(routed_as), std::move(ex), std::move(done));
}

bus_result<std::string> client_impl::create_stream_reader(const std::string& queue, const stream_start& start) {
  const std::string step = stream_step("read", queue);
  natsInbox* raw_inbox = nullptr;
  if (natsStatus s = natsInbox_Create(&raw_inbox); s != NATS_OK) return nats_failure(step, s);
  inbox_ptr inbox{raw_inbox};
  const std::string unique{inbox.get()};
  const std::string reader = "r-" + unique.substr(unique.rfind('.') + 1);
  json config = {{"name", reader},
                 {"ack_policy", "none"},
                 {"replay_policy", "instant"},
                 {"max_waiting", 512},
                 {"num_replicas", 1},
                 {"mem_storage", true},
                 {"inactive_threshold", std::chrono::nanoseconds(reader_inactive_threshold).count()}};
  switch (start.kind) {
    case stream_start::from::next: config["deliver_policy"] = "new"; break;
    case stream_start::from::first: config["deliver_policy"] = "all"; break;
    case stream_start::from::last: config["deliver_policy"] = "last"; break;
    case stream_start::from::sequence:
      config["deliver_policy"] = "by_start_sequence";
      config["opt_start_seq"] = std::max<std::uint64_t>(1, start.sequence);
      break;
    case stream_start::from::time:
      config["deliver_policy"] = "by_start_time";
      config["opt_start_time"] = rfc3339(start.time);
      break;
  }
  const std::string name = queue_stream_name(queue);
  auto created = api(step, "CONSUMER.CREATE." + name + "." + reader, json{{"stream_name", name}, {"config", config}});
  if (!created) return created.error();
  return reader;
}

bus_status client_impl::delete_stream_reader(const std::string& queue, const std::string& reader) {
  auto deleted =
      api(stream_step("stop reading", queue), "CONSUMER.DELETE." + queue_stream_name(queue) + "." + reader, nullptr);
  if (!deleted && deleted.error().kind != bus_errc::not_found) return deleted.error();
  return bus_ok();
}

std::shared_ptr<puller> client_impl::make_stream_puller(const std::string& queue, const std::string& reader,
                                                        boost::asio::any_io_executor ex, puller_callbacks callbacks) {
  auto self = std::static_pointer_cast<client_impl>(shared_from_this());
  auto p = std::make_shared<puller_impl>(self, queue_stream_name(queue), reader, std::move(ex), std::move(callbacks));
  if (closed_ || !p->start().ok()) return p;
  std::lock_guard lock{mutex_};
  pullers_.emplace(p.get(), p);
  return p;
}

}  // namespace amqp::bus::detail
