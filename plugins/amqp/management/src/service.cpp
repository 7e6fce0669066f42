// The listeners: HTTP/1.1 with keep-alive (Boost.Beast), a coroutine per connection on the loop the
// service was given. The API answers only a request whose Basic credentials sign in (401 with
// RabbitMQ's realm otherwise); /metrics asks for none, as rabbitmq_prometheus does.
#include "amqp/management/service.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "amqp/bus/base64.hpp"
#include "api.hpp"
#include "off_loop.hpp"
#include "routes.hpp"

namespace amqp::management {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr std::chrono::seconds idle_timeout{60};
// A user signed in again after this, so that a password the bus no longer takes stops working.
constexpr std::chrono::seconds sign_in_lifetime{60};
// A publish's body rides in the request: room for the bus's largest message, base64-encoded.
constexpr std::uint64_t largest_request = 96ULL << 20;

// A request too large to read, answered before the connection closes as RabbitMQ's 400, naming
// what was too large: a query string counts in the request line, which Beast limits with the headers.
reply too_large(const beast::error_code& ec) {
  if (ec == http::error::body_limit)
    return bad_request("the request body is larger than " + std::to_string(largest_request >> 20) + " MiB");
  return bad_request("the request line and headers, the query string with them, are larger than 8 KiB");
}

http::response<http::string_body> to_http(const reply& answered, unsigned version, bool keep_alive, bool head) {
  http::response<http::string_body> res{static_cast<http::status>(answered.status), version};
  res.set(http::field::server, "cloud");
  if (answered.status == 401) res.set(http::field::www_authenticate, "Basic realm=\"RabbitMQ Management\"");
  if (!answered.allow.empty()) res.set(http::field::allow, answered.allow);
  if (!answered.location.empty()) res.set(http::field::location, answered.location);
  if (!answered.body.empty()) res.set(http::field::content_type, answered.content_type);
  res.keep_alive(keep_alive);
  if (!head) res.body() = answered.body;
  res.prepare_payload();
  return res;
}

// Basic credentials from an Authorization header; nullopt when it carries none.
std::optional<std::pair<std::string, std::string>> basic_credentials(std::string_view header) {
  if (!header.starts_with("Basic ")) return std::nullopt;
  auto decoded = bus::base64_decode(std::string(header.substr(6)));
  if (!decoded) return std::nullopt;
  const auto colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return std::pair{decoded->substr(0, colon), decoded->substr(colon + 1)};
}

void log_failure(const std::function<void(const std::string&)>& log, std::exception_ptr e) {
  if (!e || !log) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log(std::string("management: a connection failed: ") + ex.what());
  } catch (...) {
    log("management: a connection failed");
  }
}

}  // namespace

struct service::state : std::enable_shared_from_this<service::state> {
  state(net::io_context& loop, sources s)
      : io(loop),
        src(std::move(s)),
        ex(loop.get_executor()),
        api_acceptor(loop),
        metrics_acceptor(loop),
        endpoints(src, ex),
        sample_timer(loop) {}

  std::optional<std::string> listen(tcp::acceptor& acceptor, const std::string& host, std::uint16_t port,
                                    const char* variable, bool metrics);
  net::awaitable<void> accept_loop(tcp::acceptor& acceptor, bool metrics);
  net::awaitable<void> sample_loop();
  net::awaitable<void> serve(tcp::socket socket, bool metrics);
  net::awaitable<reply> answer(const http::request<http::string_body>& req, bool metrics);
  net::awaitable<std::optional<principal>> sign_in(std::string_view authorization);

  net::io_context& io;
  sources src;
  net::any_io_executor ex;
  tcp::acceptor api_acceptor;
  tcp::acceptor metrics_acceptor;
  api endpoints;
  net::steady_timer sample_timer;  // the rates' sampling, while the API listens
  bool sampling = false;
  // Who signed in with which credentials, so that a tool polling every few seconds costs the bus
  // one sign-in a minute; the principal keeps its bus clients open.
  struct signed_in_entry {
    principal who;
    std::chrono::steady_clock::time_point until;
  };
  std::mutex signed_in_mutex;
  std::map<std::pair<std::string, std::string>, signed_in_entry> signed_in;

  // The accept loops and HTTP connections under way, so that stop() can end them and wait: each
  // holds this state, and through it the vhosts' brokers and buses.
  struct running {
    explicit running(state& s) : owner(s) {
      std::lock_guard lock{owner.running_mutex};
      ++owner.running_count;
    }
    ~running() {
      std::lock_guard lock{owner.running_mutex};
      --owner.running_count;
      owner.running_done.notify_all();
    }
    running(const running&) = delete;
    running& operator=(const running&) = delete;
    state& owner;
  };
  std::mutex running_mutex;
  std::condition_variable running_done;
  int running_count = 0;
  std::set<beast::tcp_stream*> streams;  // on the loop
};

std::optional<std::string> service::state::listen(tcp::acceptor& acceptor, const std::string& host, std::uint16_t port,
                                                  const char* variable, bool metrics) {
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return "CLOUD_AMQP_HOST='" + host + "' is not an IP address";
  const tcp::endpoint endpoint{address, port};
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor.close();
    return std::string("cannot listen on ") + host + ":" + std::to_string(port) + ": " + ec.message() +
           "; free the port or change " + variable;
  }
  net::co_spawn(ex, accept_loop(acceptor, metrics),
                [self = shared_from_this()](std::exception_ptr e) { log_failure(self->src.log, e); });
  return std::nullopt;
}

// RabbitMQ's management samples its counters every 5 s; a rate is the change over the last interval.
net::awaitable<void> service::state::sample_loop() {
  auto keep = shared_from_this();
  running counted{*this};
  while (api_acceptor.is_open()) {
    endpoints.sample_counters();
    sample_timer.expires_after(api::sample_interval);
    beast::error_code ec;
    co_await sample_timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

net::awaitable<void> service::state::accept_loop(tcp::acceptor& acceptor, bool metrics) {
  auto keep = shared_from_this();
  running counted{*this};
  for (;;) {
    beast::error_code ec;
    auto socket = co_await acceptor.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {  // e.g. EMFILE: a later accept may succeed, once a descriptor is free
      net::steady_timer pause{ex, std::chrono::milliseconds(100)};
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    net::co_spawn(ex, serve(std::move(socket), metrics),
                  [self = shared_from_this()](std::exception_ptr e) { log_failure(self->src.log, e); });
  }
}

net::awaitable<void> service::state::serve(tcp::socket socket, bool metrics) {
  auto keep = shared_from_this();
  running counted{*this};
  beast::tcp_stream stream{std::move(socket)};
  streams.insert(&stream);
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(largest_request);
    beast::error_code ec;
    stream.expires_after(idle_timeout);
    co_await http::async_read(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      auto res = to_http(too_large(ec), 11, false, false);
      co_await http::async_write(stream, res, net::redirect_error(net::use_awaitable, ec));
      break;
    }
    if (ec) break;
    const auto& req = parser.get();
    const auto answered = co_await answer(req, metrics);
    auto res = to_http(answered, req.version(), req.keep_alive(), req.method() == http::verb::head);
    stream.expires_after(idle_timeout);
    co_await http::async_write(stream, res, net::redirect_error(net::use_awaitable, ec));
    if (ec || !req.keep_alive()) break;
  }
  streams.erase(&stream);
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

net::awaitable<std::optional<principal>> service::state::sign_in(std::string_view authorization) {
  auto credentials = basic_credentials(authorization);
  if (!credentials) co_return std::nullopt;
  {
    std::lock_guard lock{signed_in_mutex};
    auto it = signed_in.find(*credentials);
    if (it != signed_in.end() && it->second.until > std::chrono::steady_clock::now()) co_return it->second.who;
    if (it != signed_in.end()) signed_in.erase(it);
  }
  auto ask = [this, credentials] { return src.sign_in(credentials->first, credentials->second); };
  auto pool = broker::bus_of(*src.vhosts.front().broker)->worker_executor();
  auto who = co_await off_loop(pool, std::move(ask));
  if (!who || !*who) co_return std::nullopt;
  std::lock_guard lock{signed_in_mutex};
  signed_in.insert_or_assign(*credentials, signed_in_entry{**who, std::chrono::steady_clock::now() + sign_in_lifetime});
  co_return **who;
}

net::awaitable<reply> service::state::answer(const http::request<http::string_body>& req, bool metrics) {
  const std::string_view target{req.target().data(), req.target().size()};
  if (metrics) {
    const auto path = target.substr(0, target.find('?'));
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      auto refused = error_reply(405, "Method Not Allowed", "Method Not Allowed");
      refused.allow = "GET, HEAD";
      co_return refused;
    }
    if (path != "/metrics" && path != "/metrics/per-object") co_return error_reply(404, "Object Not Found", "Not Found");
    auto text = co_await endpoints.metrics(path == "/metrics/per-object");
    co_return text;
  }
  auto r = parse_target(target, "/api/");
  if (!r || r->path.empty() || r->path.front().empty()) co_return error_reply(404, "Object Not Found", "Not Found");
  const std::string_view authorization{req[http::field::authorization].data(), req[http::field::authorization].size()};
  auto who = co_await sign_in(authorization);
  if (!who) co_return error_reply(401, "not_authorized", "Login failed");
  r->method = std::string(req.method_string());
  r->body = req.body();
  auto answered = co_await endpoints.answer(std::move(*r), *who);
  co_return answered;
}

service::service(net::io_context& io, sources s) : state_(std::make_shared<state>(io, std::move(s))) {}

service::~service() { stop(std::chrono::steady_clock::now() + std::chrono::seconds(5)); }

std::optional<std::string> service::listen_api(const std::string& host, std::uint16_t port) {
  auto refused = state_->listen(state_->api_acceptor, host, port, "CLOUD_AMQP_MANAGEMENT_PORT", false);
  if (!refused && !state_->sampling) {
    state_->sampling = true;
    net::co_spawn(state_->ex, state_->sample_loop(),
                  [self = state_](std::exception_ptr e) { log_failure(self->src.log, e); });
  }
  return refused;
}

std::optional<std::string> service::listen_metrics(const std::string& host, std::uint16_t port) {
  return state_->listen(state_->metrics_acceptor, host, port, "CLOUD_AMQP_PROMETHEUS_PORT", true);
}

std::uint16_t service::api_port() const {
  beast::error_code ec;
  return state_->api_acceptor.local_endpoint(ec).port();
}

std::uint16_t service::metrics_port() const {
  beast::error_code ec;
  return state_->metrics_acceptor.local_endpoint(ec).port();
}

void service::stop(std::chrono::steady_clock::time_point deadline) {
  // On the loop that owns the sockets: the accept loops end with their acceptors, each connection
  // with its socket (a request waiting on the bus ends when the bus answers).
  net::post(state_->ex, [s = state_] {
    beast::error_code ec;
    s->api_acceptor.close(ec);
    s->metrics_acceptor.close(ec);
    s->sample_timer.cancel();
    for (auto* stream : s->streams) stream->socket().close(ec);
  });
  std::unique_lock lock{state_->running_mutex};
  state_->running_done.wait_until(lock, deadline, [&] { return state_->running_count == 0; });
  std::lock_guard signed_in_lock{state_->signed_in_mutex};
  state_->signed_in.clear();  // the users' bus clients close before the adaptor's
}

}  // namespace amqp::management
