// A count follows the publishes confirmed before it.
//
// nats-server confirms a publish before the stream tells its consumers of the message, which it
// does on a goroutine of its own, in stream order; a consumer's num_pending counts a message only
// once told. So a count asked right after a confirm can miss the message (bus test "queue_info
// counts every publish confirmed before it"). This client's probe consumer, on a subject no
// queue binds, shows when the stream has told its consumers of everything stored before a probe
// message: the probe's own num_pending then counts that message. The probe is pulled after,
// which removes it (interest retention, no ack).
#include <thread>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// The server drops the probe of a process that died after this long without a pull.
constexpr std::int64_t probe_idle_ns = 3600LL * 1'000'000'000;

std::uint64_t pending_of(const json& info) { return info.value("num_pending", std::uint64_t{0}); }

}  // namespace

void client_impl::note_publish_confirmed() { counts_behind_ = true; }

// Named after this client's inbox ("_INBOX.<nuid>"). '~' is not a word character of a name
// (routing/names.cpp), so no binding's filter matches the subject.
std::string client_impl::probe_name() const { return "~counts-" + inbox_.substr(inbox_.rfind('.') + 1); }
std::string client_impl::probe_subject() const { return "amqp." + probe_name(); }

bus_status client_impl::catch_up_with_publishes(const std::string& step) {
  std::lock_guard probing{probe_mutex_};
  if (!counts_behind_.exchange(false)) return bus_ok();  // nothing confirmed since the last probe
  auto done = probe_stream_signals(step);
  if (!done) counts_behind_ = true;
  return done;
}

bus_status client_impl::create_probe(const std::string& step) {
  auto created = api(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + probe_name(),
                     json{{"stream_name", stream_name},
                          {"config",
                           {{"durable_name", probe_name()},
                            {"deliver_policy", "new"},
                            {"ack_policy", "none"},
                            {"filter_subject", probe_subject()},
                            {"mem_storage", true},
                            {"inactive_threshold", probe_idle_ns}}}});
  if (!created) return created.error();
  probe_created_ = true;
  return bus_ok();
}

bus_status client_impl::probe_stream_signals(const std::string& step) {
  const std::string what = step + ": waiting for the bus to count the publishes it confirmed";
  for (int attempt = 0;; ++attempt) {
    if (!probe_created_)
      if (auto created = create_probe(what); !created) return created;
    auto seen = probe_counted(what);
    if (!seen) return seen.error();
    switch (*seen) {
      case probe_seen::counted:
        take_probe_message(what);
        return bus_ok();
      case probe_seen::late:
        // A server too slow to signal in time gives a count that may miss a late publish, as
        // one too slow to apply settlements does (sync_settlements). The probe consumer goes
        // with its message, so that the late signal cannot count for the next probe.
        drop_probe(what);
        return bus_ok();
      case probe_seen::gone:
        // Dropped as idle (or by an operator): the probe message had nobody to count it.
        probe_created_ = false;
        if (attempt > 0) return failure(what, "the probe consumer " + probe_name() + " vanished twice");
    }
  }
}

// Publishes a probe message and waits until the probe consumer counts it.
bus_result<client_impl::probe_seen> client_impl::probe_counted(const std::string& what) {
  natsMsg* raw = nullptr;
  natsStatus s = natsConnection_Request(&raw, control_.get(), probe_subject().c_str(), nullptr, 0, request_timeout_ms());
  msg_ptr ack{raw};
  if (s == NATS_NO_RESPONDERS) return failure(what, no_jetstream_text);
  if (s != NATS_OK) return nats_failure(what, s);
  if (auto stored = parse_api_reply(what, ack.get()); !stored) return stored.error();

  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(request_timeout_ms());
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    auto info = api(what, std::string{"CONSUMER.INFO."} + stream_name + "." + probe_name(), nullptr);
    if (!info) {
      if (info.error().kind == bus_errc::not_found) return probe_seen::gone;
      return info.error();
    }
    if (pending_of(*info) > 0) return probe_seen::counted;
    if (std::chrono::steady_clock::now() >= give_up) return probe_seen::late;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

// The count this probe waited for is done; taking its message only tidies up. The server can
// count the message and then not find it (it waits for a no-wait pull it counted something for),
// so the pull waits half a second at most, and any other answer drops the probe consumer instead.
// The pull has an inbox of its own: a delivery names the message's subject, not the reply's, and
// nats.c routes such a reply to its request only while no other request is in flight.
void client_impl::take_probe_message(const std::string& what) {
  if (!took_probe_message()) drop_probe(what);
}

bool client_impl::took_probe_message() {
  constexpr std::int64_t probe_take_ns = 500'000'000;
  natsInbox* raw_inbox = nullptr;
  if (natsInbox_Create(&raw_inbox) != NATS_OK) return false;
  inbox_ptr inbox{raw_inbox};
  natsSubscription* raw_sub = nullptr;
  if (natsConnection_SubscribeSync(&raw_sub, control_.get(), inbox.get()) != NATS_OK) return false;
  subscription_ptr sub{raw_sub};
  const std::string next = std::string{"$JS.API.CONSUMER.MSG.NEXT."} + stream_name + "." + probe_name();
  const std::string request = json{{"batch", 1}, {"no_wait", true}, {"expires", probe_take_ns}}.dump();
  natsMsg* raw = nullptr;
  natsStatus s = natsConnection_PublishRequestString(control_.get(), next.c_str(), inbox.get(), request.c_str());
  if (s == NATS_OK) s = natsSubscription_NextMsg(&raw, sub.get(), request_timeout_ms());
  msg_ptr taken{raw};
  natsSubscription_Unsubscribe(sub.get());
  // The probe message stayed (the next probe would count it at once) or vanished: the caller
  // drops the probe consumer, which drops the message (nothing else is interested); a new one
  // starts past it.
  return s == NATS_OK && natsMsg_GetSubject(taken.get()) == probe_subject();
}

void client_impl::drop_probe(const std::string& what) {
  probe_created_ = false;
  (void)api(what, std::string{"CONSUMER.DELETE."} + stream_name + "." + probe_name(), nullptr);
}

void client_impl::delete_probe() {
  std::lock_guard probing{probe_mutex_};
  if (!probe_created_ || !control_) return;
  const std::string del = std::string{"$JS.API.CONSUMER.DELETE."} + stream_name + "." + probe_name();
  natsMsg* raw = nullptr;
  natsConnection_RequestString(&raw, control_.get(), del.c_str(), "", 1000);
  msg_ptr reply{raw};
  probe_created_ = false;
}

}  // namespace amqp::bus::detail
