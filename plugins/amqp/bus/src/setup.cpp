// Mount steps after dialing: stream AMQP, bucket amqp, and what the server's consumers accept.
#include <algorithm>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

std::string joined(const json& list) {
  std::string out = "[";
  for (const auto& item : list) {
    if (out.size() > 1) out += ", ";
    out += item.is_string() ? item.get<std::string>() : item.dump();
  }
  return out + "]";
}

// What differs between an existing AMQP stream and what the adaptor needs; empty = fine.
// Only properties the adaptor's semantics depend on are compared; sizes and ages are the
// operator's to tune and are left as found (replicas and max_consumers: converge_stream).
std::string stream_mismatch(const json& config) {
  const json subjects = config.value("subjects", json::array());
  if (subjects != json::array({stream_subjects}))
    return "its subjects are " + joined(subjects) + ", expected [" + stream_subjects + "]";
  // Interest: a store of a release before the adaptor removed settled messages itself, made
  // limits by use_limits_retention once its queues read only their own subjects.
  const std::string retention = config.value("retention", std::string{"limits"});
  if (retention != "limits" && retention != "interest")
    return "its retention is " + retention + ", expected limits (the adaptor removes what each queue settled)";
  return {};
}

}  // namespace

// Known from the mount (or an earlier call) without a request: asked every second by the broker.
bus_result<bool> client_impl::use_limits_retention() {
  if (*limits_retention_) return true;
  const std::string step = std::string{"make stream "} + stream_name + "'s retention limits";
  auto info = api(step, std::string{"STREAM.INFO."} + stream_name, nullptr);
  if (!info) return info.error();
  json config = info->value("config", json::object());
  if (config.value("retention", std::string{"limits"}) != "limits") {
    config["retention"] = "limits";
    auto updated = api(step, std::string{"STREAM.UPDATE."} + stream_name, config);
    if (!updated) return updated.error();
    if (updated->value("config", json::object()).value("retention", std::string{}) != "limits") return false;
  }
  *limits_retention_ = true;
  return true;
}

std::int64_t client_impl::stream_max_consumers() const {
  return static_cast<std::int64_t>(options_.max_queues + adaptor_consumers);
}

std::string client_impl::stream_max_consumers_why() const {
  return "CLOUD_AMQP_MAX_QUEUES=" + std::to_string(options_.max_queues) + " plus " +
         std::to_string(adaptor_consumers) + " for the adaptor's own";
}

client_impl::stream_setting client_impl::replicas_setting() const {
  return {"num_replicas", replicas_, "CLOUD_AMQP_REPLICAS, or its default"};
}

std::vector<client_impl::stream_setting> client_impl::stream_settings() const {
  return {replicas_setting(),
          {"max_consumers", stream_max_consumers(), stream_max_consumers_why()},
          {"allow_msg_schedules", true, "delayed messages (x-delayed-message exchanges)"}};
}

std::optional<std::string> client_impl::update_stream(const std::string& step, const std::string& stream,
                                                      const json& info, const std::vector<stream_setting>& wanted) {
  json config = info.value("config", json::object());
  bool differs = false;
  for (const auto& w : wanted) {
    differs = differs || config.value(w.field, json{}) != w.value;
    config[w.field] = w.value;
  }
  if (!differs) return std::nullopt;
  auto updated = api(step, "STREAM.UPDATE." + stream, config);
  if (updated) return std::nullopt;
  return updated.error().text;
}

bus_status client_impl::converge_stream(const std::string& step, const std::string& stream, const json& info,
                                        const std::vector<stream_setting>& wanted) {
  const auto refused = update_stream(step, stream, info, wanted);
  if (!refused) return bus_ok();
  const json found = info.value("config", json::object());
  std::string text;
  for (const auto& w : wanted) {
    const auto was = found.value(w.field, json{});
    if (was == w.value) continue;
    text += (text.empty() ? "" : "; ") + std::string{"its "} + w.field + " is " + (was.is_null() ? "unset" : was.dump()) +
            " and " + w.value.dump() + " is wanted (" + w.why + ")";
  }
  return failure(step, "stream " + stream + ": " + text + ", but the bus refused the change (" + *refused +
                           "); set the variable to what the stream has, or give the bus what the change needs "
                           "(servers for its replicas, an account limit for its consumers)");
}

bus_status client_impl::check_account_consumers(const std::string& step) {
  auto account = api(step, "INFO", nullptr);
  if (!account) return account.error();
  // A tiered account limits each replica count apart ("R1", "R3"); an untiered one at the top.
  const std::string tier = "R" + std::to_string(replicas_);
  json limits = account->value("limits", json::object());
  std::string which = "its max_consumers";
  if (auto tiers = account->find("tiers"); tiers != account->end() && tiers->is_object() && tiers->contains(tier)) {
    limits = (*tiers)[tier].value("limits", json::object());
    which += ", tier " + tier;
  }
  const auto allowed = limits.value("max_consumers", std::int64_t{-1});
  if (allowed <= 0 || allowed >= stream_max_consumers()) return bus_ok();
  const auto queues = allowed - static_cast<std::int64_t>(adaptor_consumers);
  const std::string remedy = queues > 0 ? "set CLOUD_AMQP_MAX_QUEUES to " + std::to_string(queues) +
                                              " or less, or raise the account's max_consumers"
                                        : "raise the account's max_consumers";
  return failure(step, "the NATS account allows a stream " + std::to_string(allowed) + " consumers (" + which +
                           "), and stream " + stream_name + " needs " + std::to_string(stream_max_consumers()) +
                           " (" + stream_max_consumers_why() + "); " + remedy,
                 bus_errc::limit);
}

bus_status client_impl::ensure_stream() {
  const std::string step = std::string{"stream "} + stream_name;
  if (auto fits = check_account_consumers(step); !fits) return fits;
  auto info = api(step, std::string{"STREAM.INFO."} + stream_name, nullptr);
  if (info) {
    const std::string differs = stream_mismatch(info->value("config", json::object()));
    stream_created_ = info->value("created", std::string{});
    *limits_retention_ = info->value("config", json::object()).value("retention", std::string{}) == "limits";
    if (!differs.empty())
      return failure(step, "a stream named " + std::string{stream_name} + " already exists and " + differs +
                               "; it is left untouched: delete or fix it, or point CLOUD_PUBSUB_URL at another bus");
    if (auto converged = converge_stream(step, stream_name, *info, stream_settings()); !converged) return converged;
    return ensure_delayed_consumers(step);
  }
  if (info.error().kind != bus_errc::not_found) return info.error();

  json config = {{"name", stream_name},
                 {"subjects", {stream_subjects}},
                 {"retention", "limits"},
                 {"storage", "file"},
                 {"discard", "old"},
                 {"num_replicas", replicas_},
                 {"max_consumers", stream_max_consumers()},
                 {"max_bytes", options_.max_bytes},
                 {"max_age", options_.max_age_seconds * ns_per_second},
                 {"allow_msg_schedules", true}};
  auto created = api(step, std::string{"STREAM.CREATE."} + stream_name, config);
  if (!created) return created.error();
  stream_created_ = created->value("created", std::string{});
  *limits_retention_ = true;
  return ensure_delayed_consumers(step);
}

// A schedule names its target in a header, which only a read of the message itself shows.
bus_result<std::size_t> client_impl::retarget_schedules(
    const std::function<std::optional<std::string>(std::string_view target)>& retarget) {
  const std::string step = "delayed messages of an earlier release";
  const std::vector<std::string> filter{std::string{delayed_subject_root} + ".>"};
  std::size_t moved = 0;
  for (std::uint64_t from = 1;;) {
    auto next = next_stored(from, filter, step);
    if (!next) return next.error();
    if (!*next) return moved;
    from = (*next)->seq + 1;
    natsMsg* raw = nullptr;
    jsErrCode js_code = static_cast<jsErrCode>(0);
    if (natsStatus s = js_GetMsg(&raw, js_.get(), stream_name, (*next)->seq, nullptr, &js_code); s != NATS_OK) {
      if (s == NATS_NOT_FOUND) continue;  // fired meanwhile
      return nats_failure(step, s, js_code);
    }
    msg_ptr stored{raw};
    const char* target = nullptr;
    if (natsMsgHeader_Get(stored.get(), "Nats-Schedule-Target", &target) != NATS_OK) continue;
    auto retargeted = retarget(target);
    if (!retargeted) continue;
    if (auto again = store_schedule_again(stored.get(), *retargeted, step); !again) return again.error();
    ++moved;
  }
}

// `stored`'s subject, schedule, properties and body, with `target`; its subject's earlier schedule
// is replaced.
bus_status client_impl::store_schedule_again(natsMsg* stored, const std::string& target, const std::string& step) {
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, natsMsg_GetSubject(stored), nullptr, natsMsg_GetData(stored),
                                natsMsg_GetDataLength(stored));
  msg_ptr again{raw};
  for (const char* name : {"Nats-Schedule", props_header, routed_as_header}) {
    const char* value = nullptr;
    if (s == NATS_OK && natsMsgHeader_Get(stored, name, &value) == NATS_OK)
      s = natsMsgHeader_Set(again.get(), name, value);
  }
  if (s == NATS_OK) s = natsMsgHeader_Set(again.get(), "Nats-Schedule-Target", target.c_str());
  if (s != NATS_OK) return nats_failure(step, s);
  jsPubAck* ack = nullptr;
  jsErrCode js_code = static_cast<jsErrCode>(0);
  s = js_PublishMsg(&ack, js_.get(), again.get(), nullptr, &js_code);
  jsPubAck_Destroy(ack);
  if (s != NATS_OK)
    return nats_failure(step + ": storing the schedule on " + natsMsg_GetSubject(stored) + " again", s, js_code);
  return bus_ok();
}

// Interest retention keeps only what some consumer's filter matches. The holder's matches every
// schedule and it never pulls, so a schedule stays until the server fires it and purges it; the
// copy the server stores when it fires stays on due_consumer until a router has routed it.
bus_status client_impl::ensure_delayed_consumers(const std::string& step) {
  if (auto held = ensure_own_consumer(step, delayed_holder, std::string{delayed_subject_root} + ".>"); !held)
    return held;
  return ensure_own_consumer(step, due_consumer, std::string{due_subject_root} + ".>");
}

// Created, or converged in place where it differs (a create of an existing durable updates it).
bus_status client_impl::ensure_own_consumer(const std::string& step, const char* name, const std::string& filter) {
  auto created = api(step, std::string{"CONSUMER.DURABLE.CREATE."} + stream_name + "." + name,
                     json{{"stream_name", stream_name},
                          {"config",
                           {{"durable_name", name},
                            {"deliver_policy", "all"},
                            {"ack_policy", "explicit"},
                            {"filter_subject", filter}}}});
  if (!created) return created.error();
  return bus_ok();
}

bus_status client_impl::ensure_bucket() {
  const std::string step = std::string{"bucket "} + bucket_name;
  const std::string kv_stream = std::string{"KV_"} + bucket_name;
  const std::string kv_subjects = std::string{"$KV."} + bucket_name + ".>";
  auto info = api(step, "STREAM.INFO." + kv_stream, nullptr);
  if (!info && info.error().kind != bus_errc::not_found) return info.error();
  if (info) {
    const json subjects = info->value("config", json::object()).value("subjects", json::array());
    if (subjects != json::array({kv_subjects}))
      return failure(step, "stream " + kv_stream + " already exists with subjects " + joined(subjects) +
                               ", so it is not a key-value bucket named " + bucket_name +
                               ": delete that stream, or point CLOUD_PUBSUB_URL at another bus");
    if (auto matched = converge_stream(step, kv_stream, *info, {replicas_setting()}); !matched) return matched;
  } else {
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = bucket_name;
    cfg.History = 1;
    cfg.StorageType = js_FileStorage;
    cfg.Replicas = replicas_;
    kvStore* created = nullptr;
    if (natsStatus s = js_CreateKeyValue(&created, js_.get(), &cfg); s != NATS_OK)
      return nats_failure(step + ": creating it failed", s);
    kvStore_Destroy(created);
  }
  kvStore* kv = nullptr;
  if (natsStatus s = js_KeyValue(&kv, js_.get(), bucket_name); s != NATS_OK)
    return nats_failure(step + ": opening it failed", s);
  kv_.reset(kv);
  return bus_ok();
}

// A NATS account is a JetStream of its own: the signed-in user works on the service's stream and
// bucket only when it is of the service's account, where its stream AMQP is the service's own
// (created at the same instant). Its facts are the service's (the same servers).
bus_status client_impl::join(const client& service_client) {
  const auto& service = static_cast<const client_impl&>(service_client);
  const std::string step = "stream " + std::string{stream_name} + " as " + user_text();
  std::lock_guard lock{join_mutex_};
  if (!stream_created_.empty()) {
    if (stream_created_ == service.stream_created_) return bus_ok();
    return failure(step, "the user's stream " + std::string{stream_name} + " is another account's", bus_errc::denied);
  }
  auto info = api(step, std::string{"STREAM.INFO."} + stream_name, nullptr);
  if (!info && info.error().kind == bus_errc::not_found)
    return failure(step, "the user's account has no stream " + std::string{stream_name} +
                             ": the user is not of this virtual host's NATS account", bus_errc::denied);
  if (!info) return info.error();
  if (info->value("created", std::string{}) != service.stream_created_)
    return failure(step, "the user's stream " + std::string{stream_name} +
                             " is another account's: the user is not of this virtual host's NATS account",
                   bus_errc::denied);
  kvStore* kv = nullptr;
  const auto started = std::chrono::steady_clock::now();
  if (natsStatus s = js_KeyValue(&kv, js_.get(), bucket_name); s != NATS_OK) {
    const std::string kv_info = std::string{"$JS.API.STREAM.INFO.KV_"} + bucket_name;
    if (s == NATS_TIMEOUT && denied_since(kv_info, started))
      return denied("bucket " + std::string{bucket_name} + " as " + user_text(), kv_info);
    return nats_failure("bucket " + std::string{bucket_name} + " as " + user_text(), s);
  }
  kv_.reset(kv);
  stream_created_ = service.stream_created_;
  return bus_ok();
}

// The server refuses a subscription after accepting it, with an error of its own that precedes
// the answer to start_inbox's flush: the connection holds it as its last error by now.
bus_status client_impl::check_inbox_permitted() {
  for (natsConnection* nc : {conn_.get(), control_.get()}) {
    const char* text = nullptr;
    if (natsConnection_GetLastError(nc, &text) == NATS_NOT_PERMITTED && text != nullptr &&
        std::string_view{text}.find("Subscription") != std::string_view::npos)
      return failure("reply subscription",
                     "the bus does not let " + user_text() + " receive the answers to its requests (" + text +
                         "); grant it subscribe on _INBOX.>",
                     bus_errc::denied);
  }
  return bus_ok();
}

}  // namespace amqp::bus::detail
