#include "topology/topology_store.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <nlohmann/json.hpp>
#include <string_view>

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "channel/channel_context.hpp"

namespace amqp::broker::store {
namespace {

// A lost revision race is retried this many times before it is reported: each retry means
// another writer changed the same key in between, so the bound is only reached under a storm.
constexpr int max_attempts = 16;

// How long a snapshot of the bucket may take (a watch's replay: one round trip per entry
// batch; the bucket holds one small entry per exchange and per queue).
constexpr auto snapshot_timeout = std::chrono::seconds(10);

std::string with_node(std::string json, bool transient, std::string_view node) {
  if (!transient || node.empty()) return json;
  auto value = nlohmann::json::parse(json);
  value["node"] = node;
  return value.dump();
}

template <class Def, class Parse>
create_outcome<Def> create_entry(broker& b, bus::client& bus, const std::string& key, const std::string& value,
                                 Parse parse) {
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    auto written = bus.kv_create(key, value);
    if (written) {
      b.apply_entry(key, value, *written);
      return created{value, *written};
    }
    if (written.error().kind != bus::bus_errc::conflict) return written.error();
    auto current = bus.kv_get(key);
    if (!current) {
      if (current.error().kind == bus::bus_errc::not_found) continue;  // deleted meanwhile
      return current.error();
    }
    auto def = parse(current->value);
    if (!def) return bus::bus_error{"bucket entry " + key + " is unreadable: " + def.error().text};
    b.apply_entry(key, current->value, current->revision);
    return *def;
  }
  return bus::bus_error{"bucket entry " + key + " kept changing while it was being created"};
}

}  // namespace

bool is_transient(const routing::exchange_def& def) { return !def.durable; }
bool is_transient(const routing::queue_def& def) { return !def.durable || def.exclusive; }

std::string exchange_value(const routing::exchange_def& def, std::string_view node) {
  return with_node(routing::encode_exchange(def), is_transient(def), node);
}

std::string queue_value(const routing::queue_def& def, std::string_view node) {
  return with_node(routing::encode_queue(def), is_transient(def), node);
}

std::string node_of(std::string_view json) {
  auto value = nlohmann::json::parse(json, nullptr, false);
  if (!value.is_object()) return {};
  auto it = value.find("node");
  return it != value.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

create_outcome<routing::exchange_def> create_exchange(broker& b, bus::client& bus, const std::string& name,
                                                      const routing::exchange_def& def) {
  return create_entry<routing::exchange_def>(b, bus, routing::exchange_key(name),
                                             exchange_value(def, b.node()),
                                             [](std::string_view v) { return routing::parse_exchange(v); });
}

create_outcome<routing::queue_def> create_queue(broker& b, bus::client& bus, const std::string& name,
                                                const routing::queue_def& def) {
  return create_entry<routing::queue_def>(b, bus, routing::queue_key(name), queue_value(def, b.node()),
                                          [](std::string_view v) { return routing::parse_queue(v); });
}

std::variant<update_status, bus::bus_error> update_queue(broker& b, bus::client& bus, const std::string& name,
                                                  const std::function<bool(routing::queue_def&)>& change,
                                                  bus::kv_entry* entry) {
  const auto key = routing::queue_key(name);
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    auto current = attempt == 0 && entry && entry->revision != 0 ? bus::bus_result<bus::kv_entry>{*entry} : bus.kv_get(key);
    if (!current) {
      if (current.error().kind == bus::bus_errc::not_found) return update_status::absent;
      return current.error();
    }
    auto def = routing::parse_queue(current->value);
    if (!def) return bus::bus_error{"bucket entry " + key + " is unreadable: " + def.error().text};
    if (!change(*def)) {
      b.apply_entry(key, current->value, current->revision);
      if (entry) *entry = *current;
      return update_status::done;
    }
    // The declaring node's mark stays with the queue whoever edits its bindings.
    auto value = with_node(routing::encode_queue(*def), is_transient(*def), node_of(current->value));
    auto written = bus.kv_update(key, value, current->revision);
    if (written) {
      b.apply_entry(key, value, *written);
      if (entry) *entry = bus::kv_entry{std::move(value), *written};
      return update_status::done;
    }
    if (written.error().kind != bus::bus_errc::conflict) return written.error();
  }
  return bus::bus_error{"queue '" + name + "' kept changing on other replicas; retry the operation"};
}

std::variant<bool, bus::bus_error> refresh(broker& b, bus::client& bus, const std::string& key) {
  auto current = bus.kv_get(key);
  if (!current) {
    if (current.error().kind == bus::bus_errc::not_found) return false;
    return current.error();
  }
  b.apply_entry(key, current->value, current->revision);
  return true;
}

std::optional<bus::bus_error> converge_consumer(broker& b, bus::client& bus, const std::string& queue, bus::kv_entry* entry) {
  const auto key = routing::queue_key(queue);
  auto before = entry && entry->revision != 0 ? bus::bus_result<bus::kv_entry>{*entry} : bus.kv_get(key);
  if (entry) entry->revision = 0;  // known again only once converged
  std::optional<bus::bus_error> raced;  // the consumer another writer updated in between
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    if (!before) {
      if (before.error().kind == bus::bus_errc::not_found) return std::nullopt;  // deleted meanwhile
      return before.error();
    }
    b.apply_entry(key, before->value, before->revision);
    auto filters = b.filters_of(queue);
    if (filters.empty()) return std::nullopt;  // the mirror has newer news: it is gone
    auto ensured = bus.ensure_queue_consumer(routing::consumer_name(queue), filters, b.sharing_of(queue));
    if (!ensured && ensured.error().kind != bus::bus_errc::conflict) return ensured.error();
    if (!ensured) raced = ensured.error();
    auto after = bus.kv_get(key);
    if (ensured && after && after->revision == before->revision) {
      if (entry) *entry = std::move(*after);
      return std::nullopt;
    }
    before = std::move(after);
  }
  if (raced) return raced;
  return bus::bus_error{"queue '" + queue + "' kept changing on other replicas; retry the operation"};
}

namespace {

// The bucket as it is now, as a topology of its own (the mirror is left alone: its watch
// still has to see each change to tell consumers of a queue deleted elsewhere).
std::variant<routing::topology, bus::bus_error> read_bucket(bus::client& bus) {
  auto entries = bus.kv_snapshot(std::chrono::steady_clock::now() + snapshot_timeout);
  if (!entries) return entries.error();
  routing::topology topology;
  // A malformed entry is the watch's to report.
  for (const auto& e : *entries) topology.apply(e.key, std::string_view{e.entry.value});
  return topology;
}

// A queue's bucket value, read before the queue goes. Absent or unreadable: an empty
// definition, as there is nothing to reap for it.
std::variant<routing::queue_def, bus::bus_error> departing_queue(bus::client& bus, const std::string& key) {
  auto current = bus.kv_get(key);
  if (!current) {
    if (current.error().kind == bus::bus_errc::not_found) return routing::queue_def{};
    return current.error();
  }
  auto def = routing::parse_queue(current->value);
  return def ? *def : routing::queue_def{};
}

// The exchanges a definition binds, each once.
std::vector<std::string> bound_exchanges(const routing::queue_def& def) {
  std::vector<std::string> exchanges;
  for (const auto& x : def.bindings) exchanges.push_back(x.exchange);
  std::sort(exchanges.begin(), exchanges.end());
  exchanges.erase(std::unique(exchanges.begin(), exchanges.end()), exchanges.end());
  return exchanges;
}

// The messages published to the queue through the default exchange are on subjects no other
// queue's filters match: dropped by subject first, they cost the consumer's delete nothing.
// Returns those subjects.
std::variant<std::vector<std::string>, bus::bus_error> drop_own_messages(bus::client& bus, const std::string& queue) {
  auto own = routing::binding_filters("", routing::exchange_kind::direct, queue);
  if (!own) return bus::bus_error{"queue " + queue + " has no subject of its own: " + own.error().text};
  for (const auto& subject : *own)
    if (auto purged = bus.purge_subject(subject); !purged) return purged.error();
  return *own;
}

std::optional<bus::bus_error> delete_key(bus::client& bus, const std::string& key) {
  if (auto gone = bus.kv_delete(key); !gone && gone.error().kind != bus::bus_errc::not_found) {
    return gone.error();
  }
  return std::nullopt;
}

std::optional<bus::bus_error> remove_queue(broker& b, bus::client& bus, const std::string& key, const std::string& name) {
  auto departing = departing_queue(bus, key);
  if (auto* f = std::get_if<bus::bus_error>(&departing)) return *f;
  const auto& def = std::get<routing::queue_def>(departing);
  if (auto dropped = drop_own_messages(bus, name); std::holds_alternative<bus::bus_error>(dropped))
    return std::get<bus::bus_error>(dropped);
  if (auto gone = bus.delete_queue_consumer(routing::consumer_name(name)); !gone) return gone.error();
  if (auto f = delete_key(bus, key)) return f;
  broker::count(b.message_counters().queues_deleted);
  if (def.expires) {
    if (auto f = delete_key(bus, routing::use_key(name))) return f;
  }
  return reap_auto_delete_exchanges(b, bus, bound_exchanges(def));
}

}  // namespace

std::variant<bool, bus::bus_error> exchange_in_use(bus::client& bus, const std::string& exchange) {
  auto bucket = read_bucket(bus);
  if (auto* f = std::get_if<bus::bus_error>(&bucket)) return *f;
  return std::get<routing::topology>(bucket).has_bindings(exchange);
}

std::optional<bus::bus_error> drop_exchange_bindings(broker& b, bus::client& bus, const std::string& exchange) {
  // The bucket's list: bindings another replica wrote a moment ago go too.
  auto bucket = read_bucket(bus);
  if (auto* f = std::get_if<bus::bus_error>(&bucket)) return *f;
  for (const auto& queue : std::get<routing::topology>(bucket).queues_bound_to(exchange)) {
    auto updated = update_queue(b, bus, queue, [&](routing::queue_def& def) {
      return std::erase_if(def.bindings, [&](const routing::binding& x) { return x.exchange == exchange; }) != 0;
    });
    if (auto* f = std::get_if<bus::bus_error>(&updated)) return *f;
  }
  return std::nullopt;
}

std::variant<update_status, bus::bus_error> add_binding(broker& b, bus::client& bus, const std::string& queue, const std::string& exchange,
                                                 const std::string& key) {
  return update_queue(b, bus, queue, [&](routing::queue_def& def) {
    for (const auto& x : def.bindings)
      if (x.names(exchange, key)) return false;  // bound already
    def.bindings.push_back(routing::binding{exchange, key});
    return true;
  });
}

std::optional<bus::bus_error> remove_binding(broker& b, bus::client& bus, const std::string& queue, const std::string& exchange,
                                      const std::string& key) {
  bool removed = false;  // by the attempt that was written
  auto updated = update_queue(b, bus, queue, [&](routing::queue_def& def) {
    removed = std::erase_if(def.bindings, [&](const routing::binding& x) { return x.names(exchange, key); }) != 0;
    return removed;
  });
  if (auto* f = std::get_if<bus::bus_error>(&updated)) return *f;
  if (std::get<update_status>(updated) == update_status::absent || !removed) return std::nullopt;
  // An auto-delete exchange goes with its last binding (RabbitMQ).
  return reap_auto_delete_exchanges(b, bus, {exchange});
}

std::optional<bus::bus_error> reap_auto_delete_exchanges(broker& b, bus::client& bus, const std::vector<std::string>& exchanges) {
  // Whether an exchange is auto-delete never changes once declared, so the mirror rules most
  // out at no cost; one it does not know yet (declared on another replica) may be.
  std::vector<std::string> candidates;
  b.read_topology([&](const routing::topology& t) {
    for (const auto& name : exchanges) {
      const auto* def = t.find_exchange(name);
      if (def == nullptr || def->auto_delete) candidates.push_back(name);
    }
  });
  if (candidates.empty()) return std::nullopt;
  auto bucket = read_bucket(bus);  // the bucket decides "no binding left", not the mirror
  if (auto* f = std::get_if<bus::bus_error>(&bucket)) return *f;
  const auto& now = std::get<routing::topology>(bucket);
  for (const auto& name : candidates) {
    const auto* def = now.find_exchange(name);
    if (def == nullptr || !def->auto_delete || now.has_bindings(name)) continue;
    b.write_topology([&](routing::topology& t) { return t.erase_exchange(name); });
    if (auto f = delete_key(bus, routing::exchange_key(name))) return f;
  }
  return std::nullopt;
}

std::optional<bus::bus_error> remove_entry(broker& b, bus::client& bus, const std::string& key) {
  auto parsed = routing::parse_bucket_key(key);
  if (!parsed) return bus::bus_error{"bucket key '" + key + "' names neither an exchange nor a queue"};
  if (parsed->what == routing::bucket_key::kind::queue) return remove_queue(b, bus, key, parsed->name);
  if (parsed->what == routing::bucket_key::kind::use) return delete_key(bus, key);
  if (auto f = delete_key(bus, key)) return f;
  return drop_exchange_bindings(b, bus, parsed->name);
}

std::variant<std::uint64_t, bus::bus_error> pending_messages(bus::client& bus, const std::string& queue) {
  auto info = bus::queue_counts(bus, routing::consumer_name(queue), routing::queue_subject(queue), false);
  if (info) return info->ready();
  if (info.error().kind == bus::bus_errc::not_found) return std::uint64_t{0};
  return info.error();
}

std::variant<std::uint64_t, bus::bus_error> purge(broker& b, bus::client& bus, const std::string& queue) {
  auto info = bus::queue_counts(bus, routing::consumer_name(queue), routing::queue_subject(queue), false);
  if (!info) return info.error();
  const std::uint64_t count = info->ready();
  // Nothing ready: the deliveries awaiting an ack stay the channel's, as RabbitMQ's purge leaves them.
  if (count == 0) return count;
  // Every message of the queue is a copy under its own subject. Its consumer stays: deleting it
  // and creating one of the same name at once races the server's last write of the old one's
  // state into the directory both use.
  auto own = drop_own_messages(bus, queue);
  if (auto* f = std::get_if<bus::bus_error>(&own)) return *f;
  // A queue the previous release made still reads its bindings' subjects until what they hold is
  // settled (legacy_filters.hpp): those messages are others' too, so only a new consumer drops
  // them for this queue (interest retention removes what only it held).
  auto filters = b.filters_of(queue);
  auto own_subjects = std::get<std::vector<std::string>>(own);
  std::sort(filters.begin(), filters.end());
  std::sort(own_subjects.begin(), own_subjects.end());
  if (filters.empty() || filters == own_subjects) return count;
  if (auto purged = bus.purge_queue(routing::consumer_name(queue), filters, b.sharing_of(queue)); !purged)
    return purged.error();
  return count;
}

}  // namespace amqp::broker::store
