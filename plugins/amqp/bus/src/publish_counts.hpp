#pragma once
// A count follows the publishes confirmed before it.
//
// nats-server confirms a publish before the stream tells its consumers of the message, which it
// does on a goroutine of its own, in stream order; a consumer's num_pending counts a message only
// once told. So a count asked right after a confirm can miss the message (bus test "queue_info
// counts every publish confirmed before it"). A probe consumer of this client's, on a subject no
// queue binds, shows when the stream has told its consumers of everything stored before a probe
// message: the probe's own num_pending then counts that message. The probe message is deleted
// after, by its sequence (the stream keeps what nobody removes).
#include <nats/nats.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "amqp/bus/result.hpp"

namespace amqp::bus::detail {

class publish_counts {
 public:
  // A blocking JetStream API request (`$JS.API.<api_subject>`), as the client makes them.
  using api_fn = std::function<bus_result<nlohmann::json>(std::string_view step, const std::string& api_subject,
                                                          const nlohmann::json& body)>;
  // `control`: the connection that sends at once, which outlives this; `client_id`: a word
  // unique to the client (its inbox's), naming the probe consumer.
  publish_counts(natsConnection* control, std::string_view client_id, api_fn api, int timeout_ms);

  // Any thread: the bus confirmed a publish of this client's.
  void note_confirmed() { behind_ = true; }
  // True when a publish was confirmed since the last catch_up.
  bool behind() const { return behind_; }
  // Blocking: returns once the stream has told its consumers of every publish confirmed before
  // the call. One at a time; a call that finds nothing confirmed since returns at once.
  bus_status catch_up(const std::string& step);
  // Blocking, at close, before the connection goes: the probe consumer goes with its client, and
  // a catch_up after this fails at once.
  void close();

 private:
  enum class probe_seen { counted, late, gone };
  bus_status create_probe(const std::string& step);
  bus_status probe(const std::string& step);
  bus_result<probe_seen> counted(const std::string& what, std::uint64_t& seq);
  bool deleted_message(const std::string& what, std::uint64_t seq);
  void drop_probe(const std::string& what);

  natsConnection* control_;  // nullptr once closed
  std::string name_;     // the probe consumer's
  std::string subject_;  // the probe messages'
  api_fn api_;
  int timeout_ms_;
  std::mutex mutex_;  // one probe at a time; guards created_ and control_
  bool created_ = false;
  std::atomic<bool> behind_{false};
};

}  // namespace amqp::bus::detail
