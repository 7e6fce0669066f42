// Dialing the bus and the blocking JetStream API request every management call goes through.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <thread>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// nats.c has library-global threads and state (nats_Open). The host may unload this plugin
// while the process lives on; closing the library under another user of libnats would break
// it, and unloading libnats while its threads run would crash. So: open once, never close,
// and pin libnats in memory for the life of the process.
natsStatus open_library_once() {
  static const natsStatus status = [] {
    natsStatus s = nats_Open(-1);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&nats_Open), &info) != 0 && info.dli_fname != nullptr) {
      // RTLD_NOLOAD: only marks the already-loaded libnats as never-unloaded.
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    }
    return s;
  }();
  return status;
}

std::vector<std::string> split_servers(const std::string& url) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= url.size()) {
    std::size_t comma = url.find(',', start);
    if (comma == std::string::npos) comma = url.size();
    std::string one = url.substr(start, comma - start);
    one.erase(0, one.find_first_not_of(" \t"));
    one.erase(one.find_last_not_of(" \t") + 1);
    if (!one.empty()) out.push_back(std::move(one));
    start = comma + 1;
  }
  return out;
}

// "nats://svc:secret@host:4222" → "nats://host:4222": nats.c prefers a URL's user to the
// options', so a client signed in as someone else dials the bare address.
std::string without_user(const std::string& url) {
  const auto scheme = url.find("://");
  const auto from = scheme == std::string::npos ? 0 : scheme + 3;
  const auto at = url.find('@', from);
  if (at == std::string::npos || url.find('/', from) < at) return url;
  return url.substr(0, from) + url.substr(at + 1);
}

}  // namespace

const char* const no_jetstream_text =
    "nothing answers $JS.API, not even after the request timeout: JetStream is not enabled on the bus "
    "(start nats-server with -js or enable jetstream in its configuration), or its cluster has no "
    "leader (retry once it has elected one)";

client_impl::client_impl(client_options options)
    : options_(std::move(options)),
      workers_(std::make_unique<boost::asio::thread_pool>(
          static_cast<std::size_t>(std::max(1, options_.worker_threads)))) {
  servers_ = split_servers(options_.url);
  if (options_.who)
    for (auto& server : servers_) server = without_user(server);
  url_text_.clear();
  for (const auto& server : servers_) url_text_ += (url_text_.empty() ? "" : ",") + without_user(server);
}

client_impl::~client_impl() {
  close();
  workers_->stop();
  // The last reference may drop inside a worker task (run_blocking); a pool cannot join its
  // own thread, so that thread is left to finish on its own and the pool is joined elsewhere.
  if (workers_->get_executor().running_in_this_thread()) {
    std::thread([pool = std::move(workers_)] { pool->join(); }).detach();
  } else {
    workers_->join();
  }
}

int client_impl::request_timeout_ms() const {
  return static_cast<int>(std::max<std::int64_t>(1, options_.request_timeout.count()));
}

int client_impl::remaining_ms() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      options_.deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 1, 24 * 3600 * 1000));
}

// Two connections to the bus. nats.c writes what is published from a buffer that its flusher
// thread empties about a millisecond after the first write: good for publishes, which come in
// bursts and are answered asynchronously, and a millisecond lost for every round trip. So the
// traffic a client waits for (pull requests, whose deliveries a consumer's credit waits for, and
// every JetStream API and bucket request) goes over a second connection that sends at once.
namespace {

// The servers of the bus: those given and those the server's INFO announced (its cluster).
int known_servers(natsConnection* nc) {
  char** servers = nullptr;
  int count = 0;
  if (natsConnection_GetServers(nc, &servers, &count) != NATS_OK) return 1;
  std::set<std::string> distinct;
  for (int i = 0; i < count; ++i) {
    distinct.insert(servers[i]);
    std::free(servers[i]);
  }
  std::free(servers);
  return std::max<int>(1, static_cast<int>(distinct.size()));
}

}  // namespace

bus_status client_impl::dial() {
  const std::string step = "dial " + url_text_;
  if (servers_.empty()) return failure(step, "no bus URL given: set CLOUD_PUBSUB_URL or mount pubsub first");
  if (natsStatus s = open_library_once(); s != NATS_OK) return nats_failure("nats library", s);
  auto data = connect(step, options_.connection_name, false);
  if (!data) return data.error();
  conn_ = std::move(*data);
  auto control = connect(step, options_.connection_name + "-control", true);
  if (!control) return control.error();
  control_ = std::move(*control);
  if (std::chrono::steady_clock::now() > options_.deadline)
    return failure(step, "connected only after the startup deadline had passed");
  max_payload_ = natsConnection_GetMaxPayload(conn_.get());
  replicas_ = options_.replicas > 0 ? options_.replicas : std::min(3, known_servers(control_.get()));
  retry_publishes_ = replicas_ > 1;

  jsCtx* js = nullptr;
  if (natsStatus s = natsConnection_JetStream(&js, control_.get(), nullptr); s != NATS_OK) return nats_failure(step, s);
  js_.reset(js);
  return bus_ok();
}

bus_result<connection_ptr> client_impl::connect(const std::string& step, const std::string& name, bool send_at_once) {
  natsOptions* raw = nullptr;
  if (natsStatus s = natsOptions_Create(&raw); s != NATS_OK) return nats_failure(step, s);
  options_ptr opts{raw};
  std::vector<const char*> urls;
  for (const auto& u : servers_) urls.push_back(u.c_str());
  natsStatus s = natsOptions_SetServers(opts.get(), urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetNoRandomize(opts.get(), true);
  // Pullers each own a subscription; the library's delivery pool serves them all, so the
  // number of threads does not grow with consumers.
  if (s == NATS_OK) s = natsOptions_UseGlobalMessageDelivery(opts.get(), true);
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts.get(), remaining_ms());
  if (s == NATS_OK) s = natsOptions_SetName(opts.get(), name.c_str());
  if (s == NATS_OK) s = natsOptions_SetSendAsap(opts.get(), send_at_once);
  // Keep reconnecting forever: the adaptor outlives a bus restart (publishes time out
  // meanwhile instead of the process dying).
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts.get(), -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts.get(), 500);
  // A server that stops answering (paused, cut off by the network) keeps its TCP connection open:
  // with nats.c's default pings (every 2 min, 2 unanswered) every bus request would fail for
  // minutes while the other servers of the cluster are fine. A ping every 2 s, 3 unanswered:
  // the connection moves to another server within about 8 s.
  if (s == NATS_OK) s = natsOptions_SetPingInterval(opts.get(), 2000);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(opts.get(), 3);
  // The pullers' subscriptions live on the control connection.
  if (s == NATS_OK && send_at_once) s = natsOptions_SetReconnectedCB(opts.get(), &client_impl::on_reconnected, this);
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts.get(), &client_impl::on_async_error, this);
  if (s == NATS_OK && options_.who) {
    const auto& who = *options_.who;
    s = who.user.empty() ? natsOptions_SetToken(opts.get(), who.password.c_str())
                         : natsOptions_SetUserInfo(opts.get(), who.user.c_str(), who.password.c_str());
  } else if (s == NATS_OK && !options_.creds_file.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(opts.get(), options_.creds_file.c_str(), nullptr);
  }
  if (s != NATS_OK) return nats_failure(step, s);

  natsConnection* nc = nullptr;
  s = natsConnection_Connect(&nc, opts.get());
  if (s != NATS_OK) return nats_failure(step, s);
  return connection_ptr{nc};
}

// nats thread: the server refused a publish of this client's (`-ERR 'Permissions Violation for
// Publish to "<subject>"'`) and says nothing else: a publish or request to that subject is never
// answered, so it is failed here instead of timing out. (A refused subscription is read from the
// connection's last error where it matters: check_inbox_permitted.)
void client_impl::on_async_error(natsConnection*, natsSubscription*, natsStatus err, void* closure) {
  if (err != NATS_NOT_PERMITTED) return;
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);  // this error's text (nats.c sets it for the callback)
  if (text == nullptr || last != err) return;
  const std::string_view error{text};
  const auto open = error.find('"');
  const auto close = error.rfind('"');
  if (open == std::string_view::npos || close <= open || error.find("Publish") == std::string_view::npos) return;
  static_cast<client_impl*>(closure)->permission_denied(std::string{error.substr(open + 1, close - open - 1)});
}

void client_impl::permission_denied(const std::string& subject) {
  denials_.note(subject);
  // A refusal may come of a reload's new permissions, which the server applies silently.
  if (subject != user_info_subject) reread_permissions();
  if (publisher_) publisher_->refuse_subject(subject, denied("publish to " + subject, subject));
  std::vector<std::shared_ptr<puller_impl>> pullers;
  // "$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>": a queue's on stream AMQP, a stream queue
  // reader's on the queue's own stream; a puller is named by its consumer.
  const std::string next_prefix = "$JS.API.CONSUMER.MSG.NEXT.";
  const auto dot = subject.starts_with(next_prefix) ? subject.find('.', next_prefix.size()) : std::string::npos;
  const std::string queue = dot == std::string::npos ? std::string{} : subject.substr(dot + 1);
  {
    std::lock_guard lock{mutex_};
    for (auto& [key, weak] : pullers_)
      if (auto p = weak.lock(); p && !queue.empty() && p->queue() == queue) pullers.push_back(std::move(p));
  }
  for (auto& p : pullers) p->post_denied(denied_text(subject));
}

std::string client_impl::denied_text(const std::string& subject) const {
  return "the bus does not let " + user_text() + " publish to " + subject +
         " (a permissions violation; grant it in the server's authorization for that user)";
}

bus_error client_impl::denied(std::string_view step, const std::string& subject) const {
  return failure(step, denied_text(subject), bus_errc::denied);
}

std::string client_impl::user_text() const {
  if (!options_.who) return "the adaptor's own user";
  return options_.who->user.empty() ? std::string{"the token's user"} : "user '" + options_.who->user + "'";
}

bool client_impl::denied_since(const std::string& subject, std::chrono::steady_clock::time_point since) {
  return denials_.since(subject, since);
}

namespace {

// An API answer that did nothing and will do it when asked again: 10008 while the meta layer or
// the asset asked about has no leader, and 10104 when a consumer is made at once after one of its
// name was deleted (the old one's state flusher may still be writing into the directory).
bool says_ask_again(const std::string& subject, natsMsg* reply) {
  if (reply == nullptr || natsMsg_IsNoResponders(reply)) return false;
  const std::string_view data{natsMsg_GetData(reply), static_cast<std::size_t>(natsMsg_GetDataLength(reply))};
  const bool consumer_made =
      subject.starts_with("$JS.API.CONSUMER.CREATE.") || subject.starts_with("$JS.API.CONSUMER.DURABLE.CREATE.");
  if (data.find(std::to_string(JSClusterNotAvailErr)) == std::string_view::npos &&
      (!consumer_made || data.find(std::to_string(JSConsumerStoreFailedErr)) == std::string_view::npos))
    return false;  // not worth parsing
  const json body = json::parse(data, nullptr, false);
  if (!body.is_object()) return false;
  const auto error = body.find("error");
  if (error == body.end() || !error->is_object()) return false;
  const int code = error->value("err_code", 0);
  return code == JSClusterNotAvailErr || (consumer_made && code == JSConsumerStoreFailedErr);
}

}  // namespace

bus_result<json> parse_api_reply(std::string_view step, natsMsg* reply) {
  if (natsMsg_IsNoResponders(reply)) return failure(step, no_jetstream_text);
  const char* data = natsMsg_GetData(reply);
  const int len = natsMsg_GetDataLength(reply);
  json body = json::parse(data, data + len, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return failure(step, "the JetStream API answered with something that is not a JSON object");
  if (auto it = body.find("error"); it != body.end() && it->is_object()) {
    const int js_code = it->value("err_code", 0);
    std::string text = it->value("description", std::string{"unknown error"});
    const bus_errc kind = kind_of_js_code(js_code);
    if (js_code == JSNotEnabledErr || js_code == JSNotEnabledForAccountErr)
      text += ": enable JetStream on the bus (nats-server -js)";
    return failure(step, text + " [JetStream error " + std::to_string(js_code) + "]", kind, js_code);
  }
  return body;
}

bus_result<json> client_impl::api(std::string_view step, const std::string& api_subject,
                                  const json& body) {
  if (closed_) return failure(step, "bus client is closed");
  const std::string payload = body.is_null() ? std::string{} : body.dump();
  const std::string subject = "$JS.API." + api_subject;
  natsMsg* raw = nullptr;
  natsStatus s = request_through_elections(subject, raw, [&](int timeout_ms) {
    natsMsg_Destroy(std::exchange(raw, nullptr));  // an earlier attempt's, if any
    return natsConnection_Request(&raw, control_.get(), subject.c_str(), payload.data(),
                                  static_cast<int>(payload.size()), timeout_ms);
  });
  msg_ptr reply{raw};
  if (s == NATS_NO_RESPONDERS) return failure(step, no_jetstream_text);
  if (s == NATS_NOT_PERMITTED) return denied(step, subject);
  if (s != NATS_OK) return nats_failure(step, s);
  auto parsed = parse_api_reply(step, reply.get());
  if (!parsed && parsed.error().js_code == JSMaximumConsumersLimitErr) return consumer_limit(step);
  return parsed;
}

// Asking again changes nothing: the answer names the limit and what raises it.
bus_error client_impl::consumer_limit(std::string_view step) const {
  return failure(step,
                 "the bus is at a consumer limit, stream " + std::string{stream_name} + "'s (" +
                     std::to_string(stream_max_consumers()) + ": CLOUD_AMQP_MAX_QUEUES=" +
                     std::to_string(options_.max_queues) + " + " + std::to_string(adaptor_consumers) +
                     ") or the NATS account's; delete unused queues or raise the limit",
                 bus_errc::limit, JSMaximumConsumersLimitErr);
}

natsStatus client_impl::request_through_elections(const std::string& subject, natsMsg* const& reply,
                                                  const std::function<natsStatus(int timeout_ms)>& attempt) {
  ++requests_;
  constexpr auto pause = std::chrono::milliseconds{100};
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + options_.request_timeout;
  bool unanswered = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const natsStatus s = attempt(static_cast<int>(std::max<std::int64_t>(1, left.count())));
    // A request the server refused is never answered: the refusal came as an error of its own.
    if (s == NATS_TIMEOUT && denied_since(subject, started)) return NATS_NOT_PERMITTED;
    // The last attempt has what is left of the timeout, maybe a millisecond: running out of it
    // says less than the "no responders" the attempts before it heard.
    if (s == NATS_TIMEOUT && unanswered) return NATS_NO_RESPONDERS;
    const bool again = s == NATS_NO_RESPONDERS || (s == NATS_OK && says_ask_again(subject, reply));
    if (!again || left <= pause || closed_) return s;
    unanswered = unanswered || s == NATS_NO_RESPONDERS;
    std::this_thread::sleep_for(pause);
  }
}

void client_impl::on_reconnected(natsConnection*, void* closure) {
  // nats thread: only hand the news to each puller's executor. Pull requests outstanding on
  // the old connection may have died with it or not; each puller replaces its inbox, which
  // ends them for certain.
  auto* self = static_cast<client_impl*>(closure);
  self->reread_permissions();  // another server of the cluster may have other permissions
  std::vector<std::shared_ptr<puller_impl>> live;
  {
    std::lock_guard lock{self->mutex_};
    for (auto& [id, weak] : self->pullers_)
      if (auto p = weak.lock()) live.push_back(std::move(p));
  }
  for (auto& p : live) p->post_rotate();
}

}  // namespace amqp::bus::detail
