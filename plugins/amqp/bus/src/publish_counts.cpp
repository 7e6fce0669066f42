#include "publish_counts.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "amqp/bus/client.hpp"
#include "api_reply.hpp"
#include "error.hpp"
#include "nats_handle.hpp"

namespace amqp::bus::detail {

namespace {

using json = nlohmann::json;

// The server drops the probe of a process that died after this long without a pull.
constexpr std::int64_t probe_idle_ns = 3600LL * 1'000'000'000;
std::uint64_t pending_of(const json& info) { return info.value("num_pending", std::uint64_t{0}); }

}  // namespace

// '~' is not a word character of a name (routing/names.cpp), so no binding's filter matches the
// probe's subject.
publish_counts::publish_counts(natsConnection* control, std::string_view client_id, api_fn api, int timeout_ms)
    : control_(control),
      name_("~counts-" + std::string{client_id}),
      subject_("amqp." + name_),
      api_(std::move(api)),
      timeout_ms_(timeout_ms) {}

bus_status publish_counts::catch_up(const std::string& step) {
  std::lock_guard probing{mutex_};
  if (control_ == nullptr) return failure(step, "the bus client is closed");
  if (!behind_.exchange(false)) return bus_ok();  // nothing confirmed since the last probe
  auto done = probe(step);
  if (!done) behind_ = true;
  return done;
}

bus_status publish_counts::create_probe(const std::string& step) {
  auto created = api_(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + name_,
                      json{{"stream_name", stream_name},
                           {"config",
                            {{"durable_name", name_},
                             {"deliver_policy", "new"},
                             {"ack_policy", "none"},
                             {"filter_subject", subject_},
                             {"mem_storage", true},
                             {"inactive_threshold", probe_idle_ns}}}});
  if (!created) return created.error();
  created_ = true;
  return bus_ok();
}

bus_status publish_counts::probe(const std::string& step) {
  const std::string what = step + ": waiting for the bus to count the publishes it confirmed";
  for (int attempt = 0;; ++attempt) {
    if (!created_)
      if (auto made = create_probe(what); !made) return made;
    std::uint64_t seq = 0;
    auto seen = counted(what, seq);
    if (!seen) return seen.error();
    switch (*seen) {
      case probe_seen::counted:
        // A probe message left behind would count for the next probe: the consumer goes then.
        if (!deleted_message(what, seq)) drop_probe(what);
        return bus_ok();
      case probe_seen::late:
        // A server too slow to signal in time gives a count that may miss a late publish, as
        // one too slow to apply settlements does (sync_settlements). The probe consumer goes
        // with its message, so that the late signal cannot count for the next probe.
        deleted_message(what, seq);
        drop_probe(what);
        return bus_ok();
      case probe_seen::gone:
        // Dropped as idle (or by an operator): the probe message had nobody to count it.
        created_ = false;
        if (attempt > 0) return failure(what, "the probe consumer " + name_ + " vanished twice");
    }
  }
}

// Publishes a probe message and waits until the probe consumer counts it.
bus_result<publish_counts::probe_seen> publish_counts::counted(const std::string& what, std::uint64_t& seq) {
  natsMsg* raw = nullptr;
  natsStatus s = natsConnection_Request(&raw, control_, subject_.c_str(), nullptr, 0, timeout_ms_);
  msg_ptr ack{raw};
  if (s == NATS_NO_RESPONDERS) return failure(what, no_jetstream_text);
  if (s != NATS_OK) return nats_failure(what, s);
  auto stored = parse_api_reply(what, ack.get());
  if (!stored) return stored.error();
  seq = stored->value("seq", std::uint64_t{0});

  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    auto info = api_(what, std::string{"CONSUMER.INFO."} + stream_name + "." + name_, nullptr);
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

// The count this probe waited for is done. The delete also takes the message out of the probe
// consumer's count (the stream tells the consumers whose filter matches it).
bool publish_counts::deleted_message(const std::string& what, std::uint64_t seq) {
  if (seq == 0) return false;
  auto deleted = api_(what, std::string{"STREAM.MSG.DELETE."} + stream_name, json{{"seq", seq}, {"no_erase", true}});
  return deleted.ok();
}

void publish_counts::drop_probe(const std::string& what) {
  created_ = false;
  (void)api_(what, std::string{"CONSUMER.DELETE."} + stream_name + "." + name_, nullptr);
}

void publish_counts::close() {
  std::lock_guard probing{mutex_};
  if (created_ && control_ != nullptr) {
    const std::string del = std::string{"$JS.API.CONSUMER.DELETE."} + stream_name + "." + name_;
    natsMsg* raw = nullptr;
    natsConnection_RequestString(&raw, control_, del.c_str(), "", 1000);
    msg_ptr reply{raw};
  }
  created_ = false;
  control_ = nullptr;
}

}  // namespace amqp::bus::detail
