#pragma once
// The management API's requests and answers, without the HTTP plumbing (service.cpp reads the
// request, signs its user in and writes what this returns).
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
#include "query.hpp"

namespace amqp::management {

struct definitions;

struct request {
  std::string method;  // GET, PUT, POST, DELETE, HEAD
  std::vector<std::string> path;  // the segments after /api/, percent-decoded
  management::query query;
  std::string body;
};

struct reply {
  unsigned status = 200;
  std::string body;  // JSON, or "" (204)
  std::string content_type = "application/json";
  std::string allow;     // with 405: the methods the path takes
  std::string location;  // with 201 for a binding
};

// A reply in RabbitMQ's error shape: {"error": error, "reason": reason}.
reply error_reply(unsigned status, const std::string& error, const std::string& reason);

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

 private:
  struct vhost_counts;
  // A GET under way: the request, its user and the vhosts the user may use.
  struct reading {
    const request& r;
    const principal& who;
    std::vector<vhost> allowed;
    std::optional<std::vector<vhost>> in(std::size_t at) const;
    reply list(nlohmann::json items) const;  // shaped by the query, as RabbitMQ shapes a list
  };
  std::optional<vhost> find(const std::string& name) const;
  reply missing(const std::string& vhost_name) const;
  boost::asio::awaitable<reply> get(const request& r, const principal& who);
  // The synchronous reads; nullopt for a path none of them serves.
  std::optional<reply> node_reading(const reading& g) const;
  std::optional<reply> topology_reading(const reading& g) const;
  std::optional<reply> parameters_reading(const reading& g) const;
  std::optional<reply> client_reading(const reading& g) const;
  boost::asio::awaitable<reply> write(const request& r, const principal& who);
  reply unwritable(const request& r, const std::optional<vhost>& v) const;
  boost::asio::awaitable<reply> overview(const std::vector<vhost>& in);
  boost::asio::awaitable<reply> queues(const request& r, const std::vector<vhost>& in);
  boost::asio::awaitable<reply> queue(const vhost& v, const std::string& name);
  boost::asio::awaitable<reply> aliveness(const vhost& v, const principal& who);
  boost::asio::awaitable<reply> declare_queue(const vhost& v, const std::string& name, const request& r,
                                              const principal& who);
  boost::asio::awaitable<reply> declare_exchange(const vhost& v, const std::string& name, const request& r,
                                                 const principal& who);
  boost::asio::awaitable<reply> delete_queue(const vhost& v, const std::string& name, const request& r,
                                             const principal& who);
  boost::asio::awaitable<reply> purge_queue(const vhost& v, const std::string& name, const principal& who);
  boost::asio::awaitable<reply> delete_exchange(const vhost& v, const std::string& name, const request& r,
                                                const principal& who);
  boost::asio::awaitable<reply> bind(const vhost& v, const std::string& exchange, const std::string& queue,
                                     const request& r, const principal& who);
  boost::asio::awaitable<reply> unbind(const vhost& v, const std::string& exchange, const std::string& queue,
                                       const std::string& props, const principal& who);
  boost::asio::awaitable<reply> publish(const vhost& v, const std::string& exchange, const request& r,
                                        const principal& who);
  boost::asio::awaitable<reply> get_messages(const vhost& v, const std::string& queue, const request& r,
                                             const principal& who);
  boost::asio::awaitable<reply> change_policy(const vhost& v, const std::string& name, const request& r,
                                              const principal& who);
  boost::asio::awaitable<reply> import(const request& r, const std::optional<vhost>& only, const principal& who);
  boost::asio::awaitable<reply> import_into(const vhost& v, const definitions& defs, const principal& who);
  nlohmann::json exchanges_json(const std::vector<vhost>& in) const;
  nlohmann::json bindings_json(const std::vector<vhost>& in) const;
  nlohmann::json consumers_json(const std::vector<vhost>& in) const;
  nlohmann::json connections_json(const std::vector<vhost>& in) const;
  nlohmann::json channels_json(const std::vector<vhost>& in) const;
  std::vector<vhost> all_vhosts() const;
  boost::asio::awaitable<std::vector<vhost>> permitted(const principal& who);
  boost::asio::awaitable<std::shared_ptr<operator_channel>> open_operator(const vhost& v, const principal& who);
  boost::asio::awaitable<reply> one_method(const vhost& v, const principal& who, wire::method m,
                                           operator_channel::done_fn done, reply success);

  struct counter_sample {
    std::chrono::steady_clock::time_point at;
    broker::message_counts counts;
  };
  // Per vhost, the last two samples (older, newer); touched on the listener's executor only.
  std::map<std::string, std::pair<counter_sample, counter_sample>> samples_;
  nlohmann::json message_stats(const std::vector<vhost>& in) const;

  const sources& src_;
  boost::asio::any_io_executor ex_;
  std::atomic<std::uint64_t> next_operator_ = 1;
};

}  // namespace amqp::management
