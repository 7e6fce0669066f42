#pragma once
// The management API without the HTTP plumbing: service.cpp reads the request, signs its user in
// and writes what answer() returns. answer() finds the request's row in the route table
// (routes.hpp), checks the path's vhost as the row needs, and runs the row's handler
// (handlers.hpp, resources/*.cpp), which uses what this class shares.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp/management/service.hpp"
#include "operator_channel.hpp"
#include "replies.hpp"
#include "shapes.hpp"

namespace amqp::management {

struct matched;

class api {
 public:
  static constexpr std::chrono::seconds sample_interval{5};
  // `ex`: serial, the listener's; `pool`: where blocking bus work runs.
  api(const sources& src, boost::asio::any_io_executor ex);
  boost::asio::awaitable<reply> answer(request r, const principal& who);
  // Prometheus's text format: aggregated, or one sample per queue and per vhost.
  boost::asio::awaitable<reply> metrics(bool per_object);
  // Every sample_interval, on the listener's executor: each vhost's message counters, for the rates.
  void sample_counters();

  // ---- for the handlers
  const sources& src() const { return src_; }
  std::optional<vhost> find(const std::string& name) const;
  // The vhosts `who` may use, as the bus says (a user of one NATS account sees that account's only).
  boost::asio::awaitable<std::vector<vhost>> permitted(const principal& who);
  // One operator channel for one request, through the user's client in the vhost; nullptr when the
  // user may not use the vhost.
  boost::asio::awaitable<std::shared_ptr<operator_channel>> open_operator(const vhost& v, const principal& who);
  // One method on an operator channel of `who`'s: `success` when it is answered as `done` asks,
  // else the reply its refusal is.
  boost::asio::awaitable<reply> one_method(const vhost& v, const principal& who, wire::method m,
                                           operator_channel::done_fn done, reply success);
  // This process's connections in `in`'s vhosts, as RabbitMQ lists them.
  nlohmann::json connections_in(const std::vector<vhost>& in) const;
  // RabbitMQ's message_stats over `in`, from the samples.
  nlohmann::json message_stats(const std::vector<vhost>& in) const;

 private:
  boost::asio::awaitable<reply> dispatch(const matched& m, const request& r, const principal& who);
  boost::asio::awaitable<bool> may_use(const vhost& v, const principal& who);

  // Per vhost, the last two samples (older, newer); touched on the listener's executor only.
  std::map<std::string, std::pair<counter_sample, counter_sample>> samples_;
  const sources& src_;
  boost::asio::any_io_executor ex_;
  std::atomic<std::uint64_t> next_operator_ = 1;
};

// Blocking (bus requests; call it on the bus pool): every queue's counts in the vhost as the
// server has them, by consumer name. A queue's unacknowledged messages are what every bus client
// of this process holds (a signed-in user's deliveries are in that user's own client); a stream
// queue's messages are what its own stream holds.
bus::bus_result<std::map<std::string, bus::queue_info>> queue_counts(const vhost& v, const routing::topology& t);
// The same for one queue (not_found while its consumer is being made).
bus::bus_result<bus::queue_info> queue_count(const vhost& v, const std::string& queue, bool stream);
// This process's consumers of each queue of the broker's vhost (another replica's are its own).
std::map<std::string, std::uint32_t> consumer_counts(const broker::broker& b);

// Whether an operator channel's answer is the one a call waits for.
template <class M>
bool is(const operator_channel::received& r) {
  return std::holds_alternative<M>(r.method);
}

inline bool settled_publish(const operator_channel::received& f) {
  return is<wire::basic_ack>(f) || is<wire::basic_nack>(f);
}
inline bool taken_get(const operator_channel::received& f) {
  return is<wire::basic_get_ok>(f) || is<wire::basic_get_empty>(f);
}

// What a refused or unanswered method on an operator channel answers over HTTP.
inline reply refused_reply(const operator_channel::answer& a, const std::string& what) {
  return refused_reply(a.refused, a.timed_out, what);
}

}  // namespace amqp::management
