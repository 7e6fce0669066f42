// Per-process broker state: the topology mirror and its watch, exclusive owners, the live
// consumer registry, and queue deletion.
//
// Exclusive queues across replicas (HIP-1326, "Two facts a single process cannot answer for the
// fleet"): the owning connection is known only to the process that holds its socket, but the
// queue's bucket value says `exclusive`. So a replica that finds an exclusive queue with no
// owner among its own connections refuses it (405): the owner is a connection of another
// replica, or gone. Exclusivity therefore holds across replicas; what stays per-process is the
// consumer count (declare-ok, if-unused, auto-delete), a lower bound with several replicas.
//
// Non-durable and exclusive entries carry the declaring node's name (topology_store.hpp).
// stop() deletes this process's ones and a restarted node deletes what a crash of its
// previous incarnation left: RabbitMQ's "transient queues do not survive their node".
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <stdexcept>

#include "amqp/bus/base64.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "channel/channel_context.hpp"
#include "housekeeping/dead_letter.hpp"
#include "housekeeping/expiry.hpp"
#include "housekeeping/legacy_filters.hpp"
#include "housekeeping/settled_removal.hpp"
#include "publish/delayed_delivery.hpp"
#include "publish/due_router.hpp"
#include "topology/topology_store.hpp"

namespace amqp::broker {
namespace {

std::string process_node_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  return std::string(host) + "/pid-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

}  // namespace

broker::broker(boost::asio::io_context& io, std::shared_ptr<bus::client> bus, settings s)
    : io_(io),
      bus_(std::move(bus)),
      settings_(std::move(s)),
      node_(settings_.node_name.empty() ? process_node_name() : settings_.node_name),
      mirror_strand_(boost::asio::make_strand(io)),
      legacy_(std::make_shared<legacy_filters>(mirror_strand_)),
      dead_letter_lane_(boost::asio::make_strand(bus_->worker_executor())) {}

broker::~broker() { watch_.stop(); }

void broker::warn(std::string_view text) const {
  if (settings_.log_warning) {
    settings_.log_warning(text);
  } else {
    std::fprintf(stderr, "amqp broker: %.*s\n", static_cast<int>(text.size()), text.data());
  }
}

void broker::note(std::string_view text) const {
  if (settings_.log_info) settings_.log_info(text);
}

void broker::report_nack(std::string_view subject, std::string_view why) {
  std::uint64_t unreported = 0;
  {
    std::lock_guard lock{nack_report_mutex_};
    const auto now = std::chrono::steady_clock::now();
    if (now - last_nack_report_ < std::chrono::seconds(1)) {
      ++nacks_unreported_;
      return;
    }
    last_nack_report_ = now;
    unreported = std::exchange(nacks_unreported_, 0);
  }
  warn("a publish to " + std::string(subject) + " is nacked: " + std::string(why) +
       (unreported == 0 ? std::string{} : " (and " + std::to_string(unreported) + " more since the last report)"));
}

// ---- the mirror

std::vector<std::string> broker::filters_of(const std::string& queue) const {
  auto own = read_topology([&](const routing::topology& t) { return t.queue_filters(queue); });
  if (own.empty()) return own;
  return legacy_->filters_of(queue).value_or(std::move(own));
}

bus::queue_sharing broker::sharing_of(const std::string& queue) const {
  return read_topology([&](const routing::topology& t) {
    const auto* def = t.find_queue(queue);
    const bool single = def && def->single_active_consumer;
    return single ? bus::queue_sharing::single_active : bus::queue_sharing::all_consumers;
  });
}

routing::queue_type broker::type_of(const std::string& queue) const {
  return read_topology([&](const routing::topology& t) {
    const auto* def = t.find_queue(queue);
    return def ? def->type() : routing::queue_type::classic;
  });
}

broker::delivery_rules broker::rules_for(const std::string& queue) const {
  return read_topology([&](const routing::topology& t) {
    const auto* def = t.find_queue(queue);
    if (!def) return delivery_rules{};
    return delivery_rules{def->message_ttl, def->delivery_limit};
  });
}

void broker::apply_entry(const std::string& key, const std::optional<std::string>& value,
                         std::uint64_t revision) {
  std::unique_lock lock(topology_mutex_);
  apply_locked(key, value, revision);
}

bool broker::apply_locked(const std::string& key, const std::optional<std::string>& value,
                          std::uint64_t revision) {
  // The watch may trail this process's own writes: an older revision must not undo them.
  auto& known = revisions_[key];
  if (revision != 0 && revision <= known) return false;
  if (revision != 0) known = revision;
  auto parsed = routing::parse_bucket_key(key);
  if (parsed && parsed->what == routing::bucket_key::kind::use) return false;  // not topology
  bool existed = false;
  if (parsed) {
    switch (parsed->what) {
      case routing::bucket_key::kind::queue: existed = topology_.find_queue(parsed->name) != nullptr; break;
      case routing::bucket_key::kind::exchange: existed = topology_.find_exchange(parsed->name) != nullptr; break;
      case routing::bucket_key::kind::policy: existed = topology_.policies().contains(parsed->name); break;
      case routing::bucket_key::kind::use: break;
    }
  }
  std::optional<std::string_view> json;
  if (value) json = *value;
  if (auto refused = topology_.apply(key, json)) {
    pending_warnings_.push_back("bucket entry " + key + " ignored: " + refused->text);
    return false;
  }
  if (parsed && parsed->what == routing::bucket_key::kind::exchange && value) {
    if (const auto* def = topology_.find_exchange(parsed->name); def && def->delayed) route_due_messages();
  }
  return value.has_value() || existed;
}

// Only once some delayed-message exchange exists can a message become due: a broker without one
// keeps no pull open on the bus.
void broker::route_due_messages() {
  if (due_routing_.exchange(true)) return;
  boost::asio::post(mirror_strand_, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->due_routing_stopped_) return;
    self->due_router_ = std::make_shared<due_router>(weak, self->bus_, self->mirror_strand_);
    self->due_router_->start();
  });
}

void broker::on_watch_change(const std::string& key, const std::optional<std::string>& value,
                             std::uint64_t revision, bool replay) {
  bool changed = false;
  std::vector<std::string> warnings;
  {
    std::unique_lock lock(topology_mutex_);
    changed = apply_locked(key, value, revision);
    warnings.swap(pending_warnings_);
  }
  for (const auto& w : warnings) warn(w);
  if (replay) {
    if (value && !store::node_of(*value).empty() && store::node_of(*value) == node_) {
      leftovers_.push_back(key);
    }
    return;
  }
  // Another replica deleted a queue: this process's consumers on it are told, as RabbitMQ
  // tells a consumer whose queue went (consumer_cancel_notify). One it declared with x-expires
  // is looked at when it could expire unused.
  auto parsed = routing::parse_bucket_key(key);
  if (changed && value && parsed && parsed->what == routing::bucket_key::kind::queue && expiry_) {
    const auto expires = read_topology([&](const routing::topology& t) -> std::optional<std::uint64_t> {
      const auto* def = t.find_queue(parsed->name);
      return def ? def->expires : std::nullopt;
    });
    if (expires) expiry_->look_by(parsed->name, std::chrono::steady_clock::now() + std::chrono::milliseconds(*expires));
  }
  if (changed && parsed && parsed->what == routing::bucket_key::kind::policy) look_at_policy_queues(parsed->name);
  if (changed && !value && parsed && parsed->what == routing::bucket_key::kind::queue) {
    std::vector<std::weak_ptr<channel_context>> channels;
    {
      std::lock_guard lock(owners_mutex_);
      exclusive_owners_.erase(parsed->name);
      uses_.erase(parsed->name);
      channels = take_consumers_locked(parsed->name);
    }
    legacy_->forget(parsed->name);
    notify_deleted(parsed->name, std::move(channels));
  }
}

bool broker::begin_trim(const std::string& queue) {
  std::lock_guard lock(owners_mutex_);
  auto [it, first] = trims_.try_emplace(queue, false);
  if (!first) it->second = true;
  return first;
}

bool broker::end_trim(const std::string& queue) {
  std::lock_guard lock(owners_mutex_);
  auto it = trims_.find(queue);
  if (it == trims_.end()) return false;
  if (it->second) {
    it->second = false;
    return true;
  }
  trims_.erase(it);
  return false;
}

void broker::look_at_policy_queues(const std::string& policy) {
  if (!expiry_) return;
  std::vector<std::pair<std::string, std::uint64_t>> looks;  // queue, in how many ms
  read_topology([&](const routing::topology& t) {
    for (const auto& [name, def] : t.queues()) {
      const auto* applied = t.policy_of(name);
      if (!applied || *applied != policy) continue;
      if (def.message_ttl || def.dead_letter) {
        looks.emplace_back(name, 0);
      } else if (def.expires) {
        looks.emplace_back(name, *def.expires);
      }
    }
  });
  const auto now = std::chrono::steady_clock::now();
  for (auto& [queue, in_ms] : looks) expiry_->look_by(std::move(queue), now + std::chrono::milliseconds(in_ms));
}

void broker::open() {
  // Set while watch_topology replays on this thread; later changes arrive on the strand.
  auto replaying = std::make_shared<std::atomic<bool>>(true);
  std::weak_ptr<broker> weak = weak_from_this();
  auto watch = bus_->watch_topology(
      mirror_strand_, [weak, replaying](std::string key, std::optional<std::string> value,
                                        std::uint64_t revision) {
        if (auto self = weak.lock()) self->on_watch_change(key, value, revision, replaying->load());
      });
  replaying->store(false);
  if (!watch) throw std::runtime_error("topology watch on bucket amqp: " + watch.error().text);
  watch_ = std::move(*watch);
  sweep_leftovers();
  // Before any consumer is converged: a previous release's consumer keeps what its filters hold.
  if (auto failed = legacy_->load(*this))
    throw std::runtime_error("listing the queues' consumers, to keep what a previous release's filters hold: " +
                             failed->text);
  legacy_->start(weak);
  retarget_previous_schedules();
  settled_removal_ = std::make_shared<settled_removal>(mirror_strand_);
  settled_removal_->start(weak);
  // Off the boot: after an upgrade there may be more queues to converge than the startup window
  // has room for, and until then each keeps a working ack wait of its own and serves its
  // consumers in arrival order.
  boost::asio::post(bus_executor(), [weak] {
    if (auto self = weak.lock()) self->converge_queue_consumers();
  });
  expiry_ = std::make_shared<expiry_sweeper>(weak, mirror_strand_);
  expiry_->start();
  boost::asio::post(bus_executor(), [weak] {
    if (auto self = weak.lock()) self->feed_stream_queues_left();
  });
}

// The release before #55's step 3 gave a delayed message's schedule the subject its publish named
// as target, which no queue reads any more once its consumer is narrowed; each is stored again
// targeting the due root, as this release's are (delayed_delivery.hpp). Only such a release's
// store can hold them, and its queues' consumers still read its filters at the first boot.
void broker::retarget_previous_schedules() {
  if (!has_legacy_queues()) return;
  const std::string due_root = std::string{bus::due_subject_root} + ".";
  auto moved = bus_->retarget_schedules([&](std::string_view target) -> std::optional<std::string> {
    if (target.starts_with(due_root) || !routing::split_subject(target)) return std::nullopt;
    return due_subject(target);
  });
  if (!moved)
    throw std::runtime_error("storing the delayed messages of a previous release again, due to this release's "
                             "router: " + moved.error().text);
  if (*moved > 0)
    warn(std::to_string(*moved) + " delayed messages a previous release stored now become due to this release's " +
         "router");
}

// A stream queue's messages go to its own stream when published. An earlier release stored them
// on stream AMQP for the queue's durable there, and a feeder copied them over: what such a durable
// still holds is copied now, in stream order, each copy named by its sequence (stored once within
// the duplicate window, so another replica copying too, or a copy made again, is kept once); then
// the durable and its subject go.
void broker::feed_stream_queues_left() {
  auto streams = read_topology([](const routing::topology& t) { return t.stream_queues(); });
  for (const auto& name : streams) {
    auto left = bus_->peek_queue(routing::consumer_name(name));
    if (!left) {
      if (left.error().kind != bus::bus_errc::not_found) warn(copying_left(name, left.error().text));
      continue;
    }
    copy_stream_queue_left(name, left->ack_floor_stream_seq + 1);
  }
}

std::string broker::copying_left(const std::string& queue, const std::string& why) {
  return "copying what an earlier release left of stream queue '" + queue + "' on stream AMQP into its stream: " +
         why + " (tried again at the next start)";
}

// On the bus pool: the message at or after `from` is copied, then the next (from its copy's answer).
void broker::copy_stream_queue_left(const std::string& queue, std::uint64_t from) {
  const auto subject = routing::queue_subject(queue);
  auto next = bus_->next_message(from, {subject});
  if (!next) return warn(copying_left(queue, next.error().text));
  if (!*next) {
    if (auto purged = bus_->purge_subject(subject); !purged) return warn(copying_left(queue, purged.error().text));
    if (auto gone = bus_->delete_queue_consumer(routing::consumer_name(queue)); !gone)
      warn(copying_left(queue, gone.error().text));
    return;
  }
  const std::uint64_t seq = (*next)->seq;
  auto d = bus_->read_message(seq);
  if (!d) {
    if (d.error().kind != bus::bus_errc::not_found) return warn(copying_left(queue, d.error().text));
    return copy_stream_queue_left(queue, seq + 1);  // removed meanwhile: by another replica's copy
  }
  auto copied = [weak = weak_from_this(), queue, seq](bus::bus_status stored) {
    auto self = weak.lock();
    if (!self) return;
    if (!stored) return self->warn(copying_left(queue, stored.error().text));
    self->copy_stream_queue_left(queue, seq + 1);
  };
  bus_->publish_to_queue_stream(routing::consumer_name(queue), std::to_string(seq),
                                d->amqp_props.empty() ? std::string{} : bus::base64_encode(d->amqp_props),
                                std::move(d->body), d->shown_subject(), bus_executor(), std::move(copied));
}

void broker::sweep_leftovers() {
  // A previous incarnation of this node crashed with transient entries: they end now.
  for (const auto& key : leftovers_) {
    if (auto parsed = routing::parse_bucket_key(key); parsed && parsed->what == routing::bucket_key::kind::queue) {
      forget_queue(parsed->name);
    } else if (parsed) {
      write_topology([&](routing::topology& t) { return t.erase_exchange(parsed->name); });
    }
    if (auto failed = store::remove_entry(*this, *bus_, key)) {
      throw std::runtime_error("removing " + key + " left by this node's previous run: " + failed->text);
    }
  }
  leftovers_.clear();
}

// A queue that keeps another ack wait is still served right (held deliveries are reported in
// progress often enough for any), and one made before consumer priorities still delivers (its
// consumers served in the order they ask, whatever their x-priority), so a failure here is only a
// warning.
void broker::converge_queue_consumers() {
  auto queues = bus_->queues_to_converge();
  if (!queues) return warn("existing queues keep their consumer's settings (the ack wait CLOUD_AMQP_ACK_WAIT, "
                           "consumer priorities): " + queues.error().text);
  // The bus names consumers; the mirror knows which queue each one is.
  const auto by_consumer = read_topology([](const routing::topology& t) {
    std::map<std::string, std::string, std::less<>> names;
    for (const auto& entry : t.queues()) names.emplace(routing::consumer_name(entry.first), entry.first);
    return names;
  });
  for (const auto& consumer : *queues) {
    auto known = by_consumer.find(consumer);
    if (known == by_consumer.end()) continue;  // deleted since, or not a queue's
    const auto& queue = known->second;
    if (auto failed = store::converge_consumer(*this, *bus_, queue))
      warn("queue '" + queue + "' keeps its previous consumer settings (the ack wait CLOUD_AMQP_ACK_WAIT, "
           "consumer priorities): " + failed->text +
           "; they are applied at the queue's next binding change or this process's next start");
  }
}

void broker::stop() {
  boost::asio::post(mirror_strand_, [self = shared_from_this()] {
    self->due_routing_stopped_ = true;
    if (self->due_router_) self->due_router_->stop();
  });
  if (expiry_) expiry_->stop();
  legacy_->stop();
  if (settled_removal_) settled_removal_->stop();
  std::set<std::string> keys;
  {
    std::lock_guard lock(owners_mutex_);
    if (stopped_) return;
    stopped_ = true;
    keys.swap(transient_);
  }
  for (const auto& key : keys) {
    // Only what still carries this node's mark: another replica may have re-declared it.
    auto current = bus_->kv_get(key);
    if (!current || store::node_of(current->value) != node_) continue;
    if (auto failed = store::remove_entry(*this, *bus_, key)) warn("stop: removing " + key + ": " + failed->text);
  }
  watch_.stop();
}

void broker::remember_transient(const std::string& bucket_key) {
  std::lock_guard lock(owners_mutex_);
  transient_.insert(bucket_key);
}

// ---- exclusive queues

std::optional<std::uint64_t> broker::exclusive_owner(const std::string& queue) const {
  std::lock_guard lock(owners_mutex_);
  auto it = exclusive_owners_.find(queue);
  if (it == exclusive_owners_.end()) return std::nullopt;
  return it->second;
}

void broker::claim_exclusive(const std::string& queue, std::uint64_t connection_id) {
  std::lock_guard lock(owners_mutex_);
  exclusive_owners_[queue] = connection_id;
}

void broker::forget_exclusive_claim(const std::string& queue) {
  std::lock_guard lock(owners_mutex_);
  exclusive_owners_.erase(queue);
}

std::vector<std::string> broker::exclusive_queues_of(std::uint64_t connection_id) const {
  std::lock_guard lock(owners_mutex_);
  std::vector<std::string> queues;
  for (const auto& [queue, owner] : exclusive_owners_) {
    if (owner == connection_id) queues.push_back(queue);
  }
  return queues;
}

bool broker::may_use(const std::string& queue, std::uint64_t connection_id,
                     std::string& sentence) const {
  bool exclusive = read_topology([&](const routing::topology& t) {
    const auto* def = t.find_queue(queue);
    return def != nullptr && def->exclusive;
  });
  auto owner = exclusive_owner(queue);
  if (!owner && !exclusive) return true;
  if (owner && *owner == connection_id) return true;
  sentence = locked_text(queue);
  return false;
}

std::string broker::locked_text(const std::string& queue) const {
  return "cannot obtain exclusive access to locked queue '" + queue + "'" + in_vhost() +
         ". It could be originally declared on another connection or the exclusive property value does not match "
         "that of the original declaration.";
}

// ---- live consumers

bool broker::add_consumer(const std::string& queue, const std::shared_ptr<channel_context>& channel,
                          const std::string& consumer_tag, bool exclusive, std::string& refusal, bool ack_required,
                          std::uint16_t prefetch) {
  {
    std::lock_guard lock(owners_mutex_);
    auto& refs = consumers_[queue];
    if (std::any_of(refs.begin(), refs.end(), [](const consumer_ref& r) { return r.exclusive; })) {
      refusal = "queue '" + queue + "'" + in_vhost() + " in exclusive use";
      return false;
    }
    if (exclusive && !refs.empty()) {
      refusal = "queue '" + queue + "'" + in_vhost() + " in exclusive use";  // RabbitMQ's text for both
      return false;
    }
    refs.push_back(consumer_ref{channel, channel.get(), consumer_tag, exclusive, ack_required, prefetch});
  }
  note_use(queue, use::consumer_added);  // from now on this replica's looks keep its x-expires clock
  return true;
}

std::vector<consumer_view> broker::consumers() const {
  std::vector<consumer_view> out;
  std::lock_guard lock(owners_mutex_);
  for (const auto& [queue, refs] : consumers_) {
    for (const auto& r : refs) {
      auto channel = r.channel.lock();
      if (!channel) continue;
      out.push_back(consumer_view{queue, r.tag, channel->connection_id(), channel->id(), r.exclusive, r.ack_required,
                                  r.prefetch});
    }
  }
  return out;
}

void broker::note_connection_client(std::uint64_t connection_id, const std::shared_ptr<bus::client>& client) {
  std::lock_guard lock(owners_mutex_);
  connection_clients_.try_emplace(connection_id, client);
}

void broker::forget_connection_client(std::uint64_t connection_id) {
  std::lock_guard lock(owners_mutex_);
  connection_clients_.erase(connection_id);
}

std::set<std::shared_ptr<bus::client>> broker::bus_clients() const {
  std::set<std::shared_ptr<bus::client>> clients{bus_};  // connections share a user's client
  std::lock_guard lock(owners_mutex_);
  for (const auto& [id, weak] : connection_clients_)
    if (auto client = weak.lock()) clients.insert(std::move(client));
  return clients;
}

std::set<std::string> broker::take_settled_consumers() {
  std::set<std::string> out;
  for (const auto& client : bus_clients())
    for (auto& consumer : client->take_settled()) out.insert(std::move(consumer));
  return out;
}

std::optional<std::string> broker::queue_of_consumer(const std::string& consumer) const {
  return read_topology([&](const routing::topology& t) -> std::optional<std::string> {
    // A consumer name is the queue's word, but for a name too long for it (hashed, "=Z").
    if (consumer.find("=Z") == std::string::npos) {
      auto name = routing::name_of_word(consumer);
      if (name && t.find_queue(*name)) return name;
      return std::nullopt;
    }
    for (const auto& entry : t.queues())
      if (routing::consumer_name(entry.first) == consumer) return entry.first;
    return std::nullopt;
  });
}

bool broker::has_legacy_queues() const { return !legacy_->empty(); }

std::map<std::string, std::uint64_t> broker::held() const {
  std::map<std::string, std::uint64_t> held;
  for (const auto& client : bus_clients())
    for (const auto& [consumer, n] : client->holdings()) held[consumer] += n;
  return held;
}

bool broker::first_in_line(const std::string& queue, const channel_context& channel,
                           const std::string& consumer_tag) const {
  std::lock_guard lock(owners_mutex_);
  auto it = consumers_.find(queue);
  if (it == consumers_.end() || it->second.empty()) return true;
  return it->second.front().key == &channel && it->second.front().tag == consumer_tag;
}

void broker::remove_consumer(const std::string& queue, const channel_context& channel,
                             const std::string& consumer_tag) {
  bool last = false;
  std::weak_ptr<channel_context> next;  // the new first in line, when the first went
  {
    std::lock_guard lock(owners_mutex_);
    auto it = consumers_.find(queue);
    if (it == consumers_.end()) return;
    auto& refs = it->second;
    const bool was_first = refs.front().key == &channel && refs.front().tag == consumer_tag;
    auto before = refs.size();
    std::erase_if(refs, [&](const consumer_ref& r) { return r.key == &channel && r.tag == consumer_tag; });
    if (refs.size() == before) return;
    if (refs.empty()) {
      consumers_.erase(it);
      last = true;
    } else if (was_first) {
      next = refs.front().channel;
    }
  }
  if (auto channel_next = next.lock(); channel_next && sharing_of(queue) == bus::queue_sharing::single_active) {
    auto exec = channel_next->executor();
    boost::asio::post(exec, [channel_next] {
      if (channel_next->is_open()) channel_next->basic().consumers_may_ask();
    });
  }
  if (!last) return;
  bool auto_delete = read_topology([&](const routing::topology& t) {
    const auto* def = t.find_queue(queue);
    return def != nullptr && def->auto_delete;
  });
  if (auto_delete) return delete_queue(queue);
  note_use(queue, use::consumer_gone);  // x-expires counts from the last consumer's end
  // What nobody reads here any more may expire at its head.
  if (expiry_ && read_topology([&](const routing::topology& t) {
        const auto* def = t.find_queue(queue);
        return def && (def->message_ttl || def->dead_letter);
      }))
    expiry_->look_by(queue, std::chrono::steady_clock::now());
}

void broker::note_use(const std::string& queue, use how) {
  const auto expires = read_topology([&](const routing::topology& t) -> std::optional<std::uint64_t> {
    const auto* def = t.find_queue(queue);
    return def ? def->expires : std::nullopt;
  });
  if (!expires) return;
  const auto now = std::chrono::steady_clock::now();
  const auto at = wall_clock_ms();
  if (expiry_) expiry_->look_by(queue, now + std::chrono::milliseconds(*expires));
  {
    std::lock_guard lock(owners_mutex_);
    auto& last = uses_[queue];
    last.at_ms = at;
    // A basic.get loop, or a living consumer's looks, write a quarter of the expiry apart; a
    // declare or a consumer's start or end always.
    const bool repeated = how == use::get || how == use::consumer_lives;
    if (repeated && now - last.written < std::chrono::milliseconds(*expires / 4)) return;
    last.written = now;
  }
  boost::asio::post(bus_executor(), [self = shared_from_this(), queue, at] {
    if (auto put = self->bus_->kv_put(routing::use_key(queue), std::to_string(at)); !put)
      self->warn("recording the use of queue '" + queue + "' for its x-expires: " + put.error().text);
    auto& io = self->io_;  // not on a bus thread: the broker's last reference may be this one
    boost::asio::post(io, [self = std::move(self)] {});
  });
}

void broker::expect_expiries(const std::vector<expiry_look>& looks) {
  if (!expiry_ || looks.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& look : looks) expiry_->look_by(look.queue, now + std::chrono::milliseconds(look.in_ms));
}

std::uint64_t broker::last_use_here_ms(const std::string& queue) const {
  std::lock_guard lock(owners_mutex_);
  auto it = uses_.find(queue);
  return it == uses_.end() ? 0 : it->second.at_ms;
}

std::uint32_t broker::consumer_count(const std::string& queue) const {
  std::lock_guard lock(owners_mutex_);
  auto it = consumers_.find(queue);
  return it == consumers_.end() ? 0 : static_cast<std::uint32_t>(it->second.size());
}

std::vector<std::weak_ptr<channel_context>> broker::take_consumers_locked(const std::string& queue) {
  std::vector<std::weak_ptr<channel_context>> channels;
  auto it = consumers_.find(queue);
  if (it == consumers_.end()) return channels;
  for (auto& ref : it->second) {
    bool seen = std::any_of(channels.begin(), channels.end(), [&](const auto& w) {
      return !w.owner_before(ref.channel) && !ref.channel.owner_before(w);
    });
    if (!seen) channels.push_back(ref.channel);
  }
  consumers_.erase(it);
  return channels;
}

void broker::notify_deleted(const std::string& queue,
                            std::vector<std::weak_ptr<channel_context>> channels) {
  for (auto& weak : channels) {
    auto channel = weak.lock();
    if (!channel) continue;
    auto exec = channel->executor();
    boost::asio::post(exec, [channel = std::move(channel), queue] {
      if (channel->is_open()) channel->basic().queue_deleted(queue);
    });
  }
}

// ---- deleting queues

bus::bus_status broker::make_consumer(bus::client& bus, const std::string& queue) {
  if (!bus.retains_by_limits() || consumer_made(queue)) return bus::bus_ok();  // interest: made at declare
  // Its one filter is its own subject, whatever its bindings: nothing to read from the bucket.
  const auto filters = filters_of(queue);
  if (filters.empty()) return bus::bus_ok();  // deleted meanwhile: its pulls find nothing
  if (auto made = bus.ensure_queue_consumer(routing::consumer_name(queue), filters, sharing_of(queue)); !made)
    return made;
  std::lock_guard lock(owners_mutex_);
  consumers_made_.insert(queue);
  return bus::bus_ok();
}

bool broker::consumer_made(const std::string& queue) const {
  std::lock_guard lock(owners_mutex_);
  return consumers_made_.contains(queue);
}

void broker::forget_consumer(const std::string& queue) {
  std::lock_guard lock(owners_mutex_);
  consumers_made_.erase(queue);
}

void broker::after_consumer_made(const std::string& queue, boost::asio::any_io_executor ex,
                                 std::function<void(bus::bus_status)> then) {
  if (consumer_made(queue)) return boost::asio::post(ex, [then = std::move(then)] { then(bus::bus_ok()); });
  boost::asio::post(bus_executor(), [self = shared_from_this(), queue, ex, then = std::move(then)]() mutable {
    auto made = self->make_consumer(*self->bus_, queue);
    boost::asio::post(ex, [then = std::move(then), made = std::move(made)] { then(made); });
  });
}

void broker::forget_queue(const std::string& queue) {
  write_topology([&](routing::topology& t) { return t.erase_queue(queue); });
  legacy_->forget(queue);
  std::vector<std::weak_ptr<channel_context>> channels;
  {
    std::lock_guard lock(owners_mutex_);
    consumers_made_.erase(queue);
    exclusive_owners_.erase(queue);
    transient_.erase(routing::queue_key(queue));
    uses_.erase(queue);
    channels = take_consumers_locked(queue);
  }
  notify_deleted(queue, std::move(channels));
}

void broker::delete_queue(const std::string& queue) {
  forget_queue(queue);
  remove_from_bus(queue, std::chrono::seconds{1});
}

void broker::remove_from_bus(const std::string& queue, std::chrono::seconds wait) {
  deletion_started(queue);
  boost::asio::post(bus_executor(), [self = shared_from_this(), queue, wait]() mutable {
    const auto failed = store::remove_entry(*self, *self->bus_, routing::queue_key(queue));
    if (failed) {
      self->warn("deleting queue '" + queue + "': " + failed->text + "; trying again in " +
                 std::to_string(wait.count()) + " s");
    }
    self->deletion_finished(queue);
    // Not on a bus thread: the broker's last reference may be this one.
    auto& io = self->io_;
    boost::asio::post(io, [self = std::move(self), queue, wait, again = failed.has_value()] {
      if (!again) return;
      auto timer = std::make_shared<boost::asio::steady_timer>(self->io_, wait);
      timer->async_wait([timer, weak = self->weak_from_this(), queue, wait](boost::system::error_code ec) {
        auto owner = weak.lock();
        if (ec || !owner) return;
        const bool known = owner->read_topology([&](const routing::topology& t) { return t.find_queue(queue) != nullptr; });
        if (!known) owner->remove_from_bus(queue, std::min(wait * 2, std::chrono::seconds{30}));
      });
    });
  });
}

void broker::count_refusal(wire::reply_code code) {
  std::lock_guard lock(owners_mutex_);
  ++refusals_[static_cast<int>(code)];
}

std::map<int, std::uint64_t> broker::refusals() const {
  std::lock_guard lock(owners_mutex_);
  return refusals_;
}

message_counts broker::counts() const {
  auto of = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const auto& c = counters_;
  return {of(c.received), of(c.received_confirm), of(c.confirmed), of(c.unroutable_returned),
          of(c.delivered_consume_manual_ack), of(c.delivered_consume_auto_ack), of(c.delivered_get_manual_ack),
          of(c.delivered_get_auto_ack), of(c.get_empty), of(c.redelivered), of(c.acknowledged)};
}

queue_counts broker::queues_counted() const {
  auto of = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  return {of(counters_.queues_declared), of(counters_.queues_created), of(counters_.queues_deleted)};
}

void broker::deletion_started(const std::string& queue) {
  std::lock_guard lock(owners_mutex_);
  ++deletions_[queue].under_way;
}

void broker::deletion_finished(const std::string& queue) {
  std::vector<std::function<void()>> waiting;
  {
    std::lock_guard lock(owners_mutex_);
    auto it = deletions_.find(queue);
    if (it == deletions_.end() || --it->second.under_way > 0) return;
    waiting = std::move(it->second.waiting);
    deletions_.erase(it);
  }
  for (auto& then : waiting) then();
}

bool broker::being_deleted(const std::string& queue) const {
  std::lock_guard lock(owners_mutex_);
  return deletions_.contains(queue);
}

void broker::after_deletion(const std::string& queue, std::function<void()> then) {
  {
    std::lock_guard lock(owners_mutex_);
    auto it = deletions_.find(queue);
    if (it != deletions_.end()) {
      it->second.waiting.push_back(std::move(then));
      return;
    }
  }
  then();
}

// ---- the seam (broker.hpp)

std::shared_ptr<broker> make_broker(boost::asio::io_context& io, std::shared_ptr<bus::client> bus,
                                    settings s) {
  auto b = std::make_shared<broker>(io, std::move(bus), std::move(s));
  b->open();
  return b;
}

const settings& settings_of(const broker& b) { return b.config(); }

routing::topology topology_of(const broker& b) {
  return b.read_topology([](const routing::topology& t) { return t; });
}

std::vector<consumer_view> consumers_of(const broker& b) { return b.consumers(); }

std::shared_ptr<bus::client> bus_of(const broker& b) { return b.bus_ptr(); }

std::map<int, std::uint64_t> refusals_of(const broker& b) { return b.refusals(); }

message_counts message_counts_of(const broker& b) { return b.counts(); }
queue_counts queue_counts_of(const broker& b) { return b.queues_counted(); }


void stop_broker(broker& b) { b.stop(); }

void connection_closed(broker& b, std::uint64_t connection_id) {
  b.forget_connection_client(connection_id);
  for (const auto& queue : b.exclusive_queues_of(connection_id)) b.delete_queue(queue);
}

std::map<std::string, std::uint64_t> held_of(const broker& b) { return b.held(); }

}  // namespace amqp::broker
