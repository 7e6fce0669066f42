#include "server.hpp"

#include <algorithm>

namespace amqp::server {

server::server(log_fn log, int loops) : log_(std::move(log)) {
  for (int i = 0; i < std::max(loops, 1); ++i) {
    // Concurrency hint 1: the loop has one thread, so Asio need not wake another for its work.
    loops_.push_back(std::make_unique<net::io_context>(1));
    work_.emplace_back(loops_.back()->get_executor());
  }
}

server::~server() {
  const auto soon = clock::now() + std::chrono::seconds(2);
  close_connections(soon);
  stop_threads(soon);
}

void server::run_threads() {
  for (auto& loop : loops_) threads_.emplace_back([this, &loop = *loop] { run_one(loop); });
}

void server::run_one(net::io_context& loop) {
  for (;;) {
    try {
      loop.run();
      break;
    } catch (const std::exception& e) {
      // Every coroutine has a completion handler that catches; this is a plain handler's bug.
      log_(log_level::error, std::string("an amqp io handler threw: ") + e.what());
    }
  }
  std::lock_guard lock(threads_mutex_);
  ++finished_threads_;
  threads_done_.notify_all();
}

void server::serve(std::shared_ptr<const vhost_map> vhosts, session_options options) {
  vhosts_ = std::move(vhosts);
  options_ = std::move(options);
}

std::optional<std::string> server::listen(const std::string& host, std::uint16_t port) {
  auto bound = listener::bind(io(), host, port);
  if (auto* refusal = std::get_if<std::string>(&bound)) return *refusal;
  listener_ = std::move(std::get<std::unique_ptr<listener>>(bound));
  listener_->start([this] { return net::any_io_executor(next_loop().get_executor()); },
                   [this](tcp::socket socket) { accept(connection_stream(std::move(socket))); }, log_);
  return std::nullopt;
}

std::optional<std::string> server::listen_tls(const std::string& host, std::uint16_t port,
                                              std::shared_ptr<ssl::context> tls) {
  auto bound = listener::bind(io(), host, port);
  if (auto* refusal = std::get_if<std::string>(&bound)) return *refusal;
  tls_ = std::move(tls);
  tls_listener_ = std::move(std::get<std::unique_ptr<listener>>(bound));
  tls_listener_->start([this] { return net::any_io_executor(next_loop().get_executor()); },
                       [this](tcp::socket socket) { accept(connection_stream(std::move(socket), *tls_)); }, log_);
  return std::nullopt;
}

net::io_context& server::next_loop() { return *loops_[next_loop_++ % loops_.size()]; }

std::vector<session_summary> server::summaries() const {
  std::vector<session_summary> out;
  for (const auto& s : registry_->live()) out.push_back(s->summary());
  return out;
}

tcp::endpoint server::endpoint() const { return listener_ ? listener_->endpoint() : tcp::endpoint{}; }
tcp::endpoint server::tls_endpoint() const { return tls_listener_ ? tls_listener_->endpoint() : tcp::endpoint{}; }

void server::accept(connection_stream stream) {
  std::unique_lock lock{accept_mutex_};
  if (closing_) {
    error_code ignored;
    stream.socket().close(ignored);
    return;
  }
  const auto id = ++next_id_;
  auto s = std::make_shared<session>(std::move(stream), id, vhosts_, options_, log_, registry_);
  lock.unlock();
  registry_->add(id, s);
  s->start();
}

void server::close_connections(clock::time_point deadline) {
  if (closing_.exchange(true)) return;
  if (listener_) listener_->stop();
  if (tls_listener_) tls_listener_->stop();
  const auto now = clock::now();
  const auto budget = std::max(deadline - now, clock::duration::zero());
  // Half the budget (at most the close-ok wait plus a little) for clients to answer 320…
  for (auto& s : registry_->live()) net::post(s->executor(), [s] { s->close_for_shutdown(); });
  const auto graceful = now + std::min<clock::duration>(budget / 2, options_.close_timeout + std::chrono::milliseconds(500));
  if (registry_->wait_empty(graceful)) return;
  // …then the sockets go; the sessions still close their channels (requeue) as they end.
  for (auto& s : registry_->live()) net::post(s->executor(), [s] { s->abort(); });
  if (!registry_->wait_empty(std::max(deadline, clock::now()))) {
    log_(log_level::warning, std::to_string(registry_->size()) + " amqp connection(s) did not end before the shutdown deadline");
  }
}

void server::stop_threads(clock::time_point deadline) {
  if (work_.empty()) return;
  work_.clear();
  {
    std::unique_lock lock(threads_mutex_);
    const auto all = static_cast<int>(threads_.size());
    if (!threads_done_.wait_until(lock, deadline, [&] { return finished_threads_ == all; })) {
      for (auto& loop : loops_) loop->stop();
    }
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  listener_.reset();
  tls_listener_.reset();
  let_go_of_vhosts();
}

void server::let_go_of_vhosts() {
  const std::lock_guard lock{accept_mutex_};
  closing_ = true;
  vhosts_.reset();
  options_.identities.reset();
}

}  // namespace amqp::server
