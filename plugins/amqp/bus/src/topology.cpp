// The topology bucket: revision-checked writes (raw publishes carrying
// Nats-Expected-Last-Subject-Sequence, so a lost race comes back as JetStream error 10071, or
// 10164 from a replicated stream, rather than as nats.c's bare NATS_ERR) and the watch that keeps the broker's mirror.
#include <boost/asio/post.hpp>

#include "client_impl.hpp"
#include "watch_state.hpp"
#include "error.hpp"

namespace amqp::bus {

topology_watch& topology_watch::operator=(topology_watch&& other) noexcept {
  if (this != &other) {
    stop();
    state_ = std::move(other.state_);
  }
  return *this;
}

topology_watch::~topology_watch() { stop(); }

void topology_watch::stop() {
  if (state_) state_->stop();
}

}  // namespace amqp::bus

namespace amqp::bus::detail {

namespace {

std::string kv_subject(const std::string& key) {
  return std::string{"$KV."} + bucket_name + "." + key;
}

// A KV key is a dot-separated list of [-/_=a-zA-Z0-9] tokens (nats.c's validKeyRe).
bool valid_key(const std::string& key) {
  if (key.empty() || key.front() == '.' || key.back() == '.') return false;
  char prev = 0;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '/' || c == '_' || c == '=' || c == '.';
    if (!ok || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  return true;
}

bool is_marker(const json& message) {
  const auto hdrs = base64_decode(message.value("hdrs", std::string{}));
  if (!hdrs) return false;
  return hdrs->find("KV-Operation: DEL") != std::string::npos ||
         hdrs->find("KV-Operation: PURGE") != std::string::npos;
}

void deliver_entry(topology_watch::state& st, kvEntry* e, bool post) {
  std::string key = kvEntry_Key(e);
  std::optional<std::string> value;
  if (kvEntry_Operation(e) == kvOp_Put)
    value.emplace(static_cast<const char*>(kvEntry_Value(e)), static_cast<std::size_t>(kvEntry_ValueLen(e)));
  const std::uint64_t revision = kvEntry_Revision(e);
  auto fn = st.callback();
  if (!fn) return;
  if (!post) {
    (*fn)(std::move(key), std::move(value), revision);
    return;
  }
  boost::asio::post(st.ex, [weak = std::weak_ptr<client::on_change_fn>(fn), key = std::move(key),
                            value = std::move(value), revision]() mutable {
    // The watch may have been stopped since: its callback is then gone.
    if (auto f = weak.lock()) (*f)(std::move(key), std::move(value), revision);
  });
}

// How long the watch thread waits for a change before looking at its stop flag again, and so
// how long topology_watch::stop() may wait. The thread is never woken by kvWatcher_Stop from
// another thread: nats.c 3.4 leaks the message kvWatcher_Next took off the subscription when
// the watcher is stopped under it.
constexpr int64_t watch_poll_ms = 200;

void watch_loop(const std::shared_ptr<topology_watch::state>& st) {
  while (!st->stopped) {
    kvEntry* raw = nullptr;
    natsStatus s = kvWatcher_Next(&raw, st->watcher.get(), watch_poll_ms);
    kv_entry_ptr e{raw};
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) break;  // the connection closed for good
    if (e) deliver_entry(*st, e.get(), true);
  }
}

// Reads `w` until nats.c's NULL "initial values done" entry, handing each entry to `each`.
template <class Each>
bus_status replay(kvWatcher* w, std::chrono::steady_clock::time_point until, const std::string& step, Each each) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return failure(step, "the initial replay did not finish before its deadline", bus_errc::timeout);
    kvEntry* raw = nullptr;
    natsStatus s = kvWatcher_Next(&raw, w, left.count());
    kv_entry_ptr e{raw};
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) return nats_failure(step, s);
    if (!e) return bus_ok();
    each(e.get());
  }
}

}  // namespace

bus_result<topology_watch> client_impl::watch_topology(
    boost::asio::any_io_executor ex, on_change_fn on_change,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  const std::string step = std::string{"watch bucket "} + bucket_name;
  if (closed_) return failure(step, "bus client is closed");
  auto st = std::make_shared<topology_watch::state>();
  st->ex = std::move(ex);
  st->on_change = std::make_shared<on_change_fn>(std::move(on_change));
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  kvWatcher* w = nullptr;
  if (natsStatus s = kvStore_WatchAll(&w, kv_.get(), &wo); s != NATS_OK) return nats_failure(step, s);
  st->watcher.reset(w);

  // Initial replay, on this thread.
  if (auto replayed = replay(st->watcher.get(), deadline.value_or(options_.deadline), step,
                             [&](kvEntry* e) { deliver_entry(*st, e, false); });
      !replayed)
    return replayed.error();
  st->thread = std::thread([st] { watch_loop(st); });
  {
    std::lock_guard lock{mutex_};
    // Short-lived watches (a one-off read of the bucket) come and go: forget the stopped ones.
    std::erase_if(watches_, [](const std::weak_ptr<topology_watch::state>& gone) { return gone.expired(); });
    watches_.push_back(st);
  }
  return topology_watch{st};
}

bus_result<std::vector<kv_keyed_entry>> client_impl::kv_snapshot(std::chrono::steady_clock::time_point deadline) {
  const std::string step = std::string{"read bucket "} + bucket_name;
  if (closed_) return failure(step, "bus client is closed");
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.IgnoreDeletes = true;
  kvWatcher* raw = nullptr;
  if (natsStatus s = kvStore_WatchAll(&raw, kv_.get(), &wo); s != NATS_OK) return nats_failure(step, s);
  kv_watcher_ptr watcher{raw};  // destroyed on this thread, never under a kvWatcher_Next
  std::vector<kv_keyed_entry> entries;
  auto replayed = replay(watcher.get(), deadline, step, [&](kvEntry* e) {
    if (kvEntry_Operation(e) != kvOp_Put) return;
    entries.push_back({kvEntry_Key(e),
                       {std::string(static_cast<const char*>(kvEntry_Value(e)), static_cast<std::size_t>(kvEntry_ValueLen(e))),
                        kvEntry_Revision(e)}});
  });
  if (!replayed) return replayed.error();
  return entries;
}

bus_result<json> client_impl::kv_last(const std::string& step, const std::string& key) {
  return api(step, std::string{"STREAM.MSG.GET.KV_"} + bucket_name, json{{"last_by_subj", kv_subject(key)}});
}

bus_result<kv_entry> client_impl::kv_get(const std::string& key) {
  const std::string step = "read topology key " + key;
  if (!valid_key(key)) return failure(step, "not a valid key");
  auto last = kv_last(step, key);
  if (!last) return last.error();
  const json message = last->value("message", json::object());
  if (is_marker(message)) return failure(step, "key deleted", bus_errc::not_found);
  auto value = base64_decode(message.value("data", std::string{}));
  if (!value) return failure(step, "the stored value is not valid base64");
  return kv_entry{std::move(*value), message.value("seq", std::uint64_t{0})};
}

bus_result<std::uint64_t> client_impl::kv_put_expecting(const std::string& step, const std::string& key,
                                                        const std::string& value,
                                                        std::optional<std::uint64_t> expected) {
  if (closed_) return failure(step, "bus client is closed");
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, kv_subject(key).c_str(), nullptr, value.data(),
                                static_cast<int>(value.size()));
  msg_ptr msg{raw};
  if (s == NATS_OK && expected)
    s = natsMsgHeader_Set(msg.get(), "Nats-Expected-Last-Subject-Sequence", std::to_string(*expected).c_str());
  if (s != NATS_OK) return nats_failure(step, s);
  natsMsg* reply_raw = nullptr;
  s = request_through_elections(
      kv_subject(key), reply_raw, [&](int timeout_ms) {
        natsMsg_Destroy(std::exchange(reply_raw, nullptr));  // an earlier attempt's, if any
        return natsConnection_RequestMsg(&reply_raw, control_.get(), msg.get(), timeout_ms);
      });
  msg_ptr reply{reply_raw};
  if (s == NATS_NO_RESPONDERS)
    return failure(step, "nothing stores the key, not even after the request timeout: the bucket is electing a "
                         "leader (retry) or was deleted");
  if (s == NATS_NOT_PERMITTED) return denied(step, kv_subject(key));
  if (s != NATS_OK) return nats_failure(step, s);
  auto ack = parse_api_reply(step, reply.get());
  if (!ack) return ack.error();
  return ack->value("seq", std::uint64_t{0});
}

bus_result<std::uint64_t> client_impl::kv_create(const std::string& key, const std::string& value) {
  const std::string step = "create topology key " + key;
  if (!valid_key(key)) return failure(step, "not a valid key");
  auto rev = kv_put_expecting(step, key, value, 0);
  if (rev || rev.error().kind != bus_errc::conflict) return rev;
  // The subject has history: a delete marker may stand where the key used to be.
  auto last = kv_last(step, key);
  if (!last) return last.error();
  const json message = last->value("message", json::object());
  if (!is_marker(message)) return failure(step, "the key already exists", bus_errc::conflict, rev.error().js_code);
  return kv_put_expecting(step, key, value, message.value("seq", std::uint64_t{0}));
}

bus_result<std::uint64_t> client_impl::kv_update(const std::string& key, const std::string& value,
                                                 std::uint64_t expected_revision) {
  const std::string step = "update topology key " + key;
  if (!valid_key(key)) return failure(step, "not a valid key");
  return kv_put_expecting(step, key, value, expected_revision);
}

bus_result<std::uint64_t> client_impl::kv_put(const std::string& key, const std::string& value) {
  const std::string step = "write topology key " + key;
  if (!valid_key(key)) return failure(step, "not a valid key");
  return kv_put_expecting(step, key, value, std::nullopt);
}

bus_status client_impl::kv_delete(const std::string& key) {
  const std::string step = "delete topology key " + key;
  if (!valid_key(key)) return failure(step, "not a valid key");
  if (closed_) return failure(step, "bus client is closed");
  const auto started = std::chrono::steady_clock::now();
  natsStatus s = kvStore_Delete(kv_.get(), key.c_str());
  if (s == NATS_TIMEOUT && denied_since(kv_subject(key), started)) return denied(step, kv_subject(key));
  if (s != NATS_OK) return nats_failure(step, s);
  return bus_ok();
}

}  // namespace amqp::bus::detail
