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

// Moves what a binding routed into the queue's retired list (the caller erases the binding).
void retire(routing::queue_def& def, const routing::binding& x, routing::exchange_kind kind, std::uint64_t until) {
  auto filters = routing::binding_filters(x.exchange, kind, x.key);
  if (!filters || until <= x.after) return;  // nothing can have been routed through it
  def.retired.push_back(routing::retired_binding{std::move(*filters), x.after, until});
}

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

bool only_own_subjects(std::vector<std::string> filters, std::vector<std::string> own) {
  std::sort(filters.begin(), filters.end());
  std::sort(own.begin(), own.end());
  return std::includes(own.begin(), own.end(), filters.begin(), filters.end());
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

std::optional<bus::bus_error> drop_exchange_bindings(broker& b, bus::client& bus, const std::string& exchange,
                                              std::optional<routing::exchange_kind> kind) {
  // The bucket's list: bindings another replica wrote a moment ago go too.
  auto bucket = read_bucket(bus);
  if (auto* f = std::get_if<bus::bus_error>(&bucket)) return *f;
  const auto queues = std::get<routing::topology>(bucket).queues_bound_to(exchange);
  if (queues.empty()) return std::nullopt;
  auto until = bus.last_sequence();
  if (!until) return until.error();
  for (const auto& queue : queues) {
    bus::kv_entry entry;
    auto updated = update_queue(b, bus, queue, [&](routing::queue_def& def) {
      auto before = def.bindings.size();
      std::erase_if(def.bindings, [&](const routing::binding& x) {
        if (x.exchange != exchange) return false;
        if (kind) retire(def, x, *kind, *until);
        return true;
      });
      return def.bindings.size() != before;
    }, &entry);
    if (auto* f = std::get_if<bus::bus_error>(&updated)) return *f;
    if (auto f = converge_consumer(b, bus, queue, &entry)) return f;
  }
  return std::nullopt;
}

namespace {

// Where a new binding's window ends: the stream's last sequence, or 0 (no window) when the
// queue's consumer has passed it already, as a freshly declared queue's has.
std::variant<std::uint64_t, bus::bus_error> window_end(bus::client& bus, const std::string& queue) {
  auto last = bus.last_sequence();
  if (!last) return last.error();
  if (*last == 0) return std::uint64_t{0};
  // The server's count may lag this client's deliveries; a lagging one only keeps the window.
  auto info = bus.peek_queue(routing::consumer_name(queue));
  if (!info && info.error().kind != bus::bus_errc::not_found) return info.error();
  return info && info->delivered_stream_seq >= *last ? 0 : *last;
}

}  // namespace

std::variant<update_status, bus::bus_error> add_binding(broker& b, bus::client& bus, const std::string& queue, const std::string& exchange,
                                                 const std::string& key) {
  auto after = window_end(bus, queue);
  if (auto* f = std::get_if<bus::bus_error>(&after)) return *f;
  bus::kv_entry entry;
  auto updated = update_queue(b, bus, queue, [&](routing::queue_def& def) {
    for (const auto& x : def.bindings)
      if (x.names(exchange, key)) return false;  // bound already: it keeps its window
    def.bindings.push_back(routing::binding{exchange, key, std::get<std::uint64_t>(after)});
    return true;
  }, &entry);
  if (std::holds_alternative<bus::bus_error>(updated) || std::get<update_status>(updated) == update_status::absent)
    return updated;
  if (auto failed = converge_consumer(b, bus, queue, &entry)) return *failed;
  // Usually nothing published before the bind is left for the consumer to read: no window then.
  auto narrowed = narrow_windows(b, bus, queue, &entry);
  if (auto* f = std::get_if<bus::bus_error>(&narrowed)) return *f;
  return updated;
}

std::optional<bus::bus_error> remove_binding(broker& b, bus::client& bus, const std::string& queue, const std::string& exchange,
                                      const std::string& key) {
  auto until = bus.last_sequence();
  if (!until) return until.error();
  const auto kind = b.read_topology([&](const routing::topology& t) -> std::optional<routing::exchange_kind> {
    const auto* def = t.find_exchange(exchange);
    return def ? std::optional{def->kind} : std::nullopt;
  });
  bool removed = false;  // by the attempt that was written
  bus::kv_entry entry;
  auto updated = update_queue(b, bus, queue, [&](routing::queue_def& def) {
    removed = false;
    std::erase_if(def.bindings, [&](const routing::binding& x) {
      if (!x.names(exchange, key)) return false;
      if (kind) retire(def, x, *kind, *until);
      return removed = true;
    });
    return removed;
  }, &entry);
  if (auto* f = std::get_if<bus::bus_error>(&updated)) return *f;
  if (std::get<update_status>(updated) == update_status::absent) return std::nullopt;
  if (auto failed = converge_consumer(b, bus, queue, &entry)) return failed;
  if (!removed) return std::nullopt;
  // A queue holding nothing the binding routed lets its filters go at once.
  auto narrowed = narrow_windows(b, bus, queue, &entry);
  if (auto* f = std::get_if<bus::bus_error>(&narrowed)) return *f;
  // An auto-delete exchange goes with its last binding (RabbitMQ).
  return reap_auto_delete_exchanges(b, bus, {exchange});
}

namespace {

// Has the consumer, at `passed` with nothing outstanding but `info` says, left behind everything
// `filters` match up to `until`? Then no message of that window can reach it any more.
std::variant<bool, bus::bus_error> nothing_left(bus::client& bus, const std::vector<std::string>& filters, std::uint64_t passed,
                                         std::uint64_t until) {
  if (passed >= until) return true;
  auto next = bus.next_message(passed + 1, filters);
  if (!next) return next.error();
  return !*next || (*next)->seq > until;
}

}  // namespace

std::variant<bool, bus::bus_error> narrow_windows(broker& b, bus::client& bus, const std::string& queue, bus::kv_entry* entry) {
  const auto def = b.read_topology([&](const routing::topology& t) -> std::optional<routing::queue_def> {
    const auto* found = t.find_queue(queue);
    return found ? std::optional{*found} : std::nullopt;
  });
  if (!def || !def->windowed()) return false;  // nothing to narrow: no consumer info needed
  auto info = bus.queue_info(routing::consumer_name(queue));
  if (!info) {
    if (info.error().kind == bus::bus_errc::not_found) return false;
    return info.error();
  }
  const std::uint64_t passed = info->delivered_stream_seq;
  // A binding's `after` goes once nothing it leaves out is ahead of the consumer.
  std::vector<routing::binding> opened;
  for (const auto& x : def->bindings) {
    if (x.after == 0) continue;
    const auto filters = b.read_topology([&](const routing::topology& t) { return t.filters_of(x); });
    if (filters.empty()) continue;
    auto left = nothing_left(bus, filters, passed, x.after);
    if (auto* f = std::get_if<bus::bus_error>(&left)) return *f;
    if (std::get<bool>(left)) opened.push_back(x);
  }
  // A retired binding goes once what it routed is acked: past the ack floor, or nothing of it
  // ahead of the consumer and nothing outstanding.
  std::vector<routing::retired_binding> done;
  for (const auto& r : def->retired) {
    bool settled = info->ack_floor_stream_seq >= r.until;
    if (!settled && info->num_ack_pending == 0) {
      auto left = nothing_left(bus, r.filters, passed, r.until);
      if (auto* f = std::get_if<bus::bus_error>(&left)) return *f;
      settled = std::get<bool>(left);
    }
    if (settled) done.push_back(r);
  }
  if (opened.empty() && done.empty()) return false;
  auto updated = update_queue(b, bus, queue, [&](routing::queue_def& d) {
    bool changed = false;
    for (auto& x : d.bindings) {
      if (x.after != 0 && std::find(opened.begin(), opened.end(), x) != opened.end()) {
        x.after = 0;
        changed = true;
      }
    }
    const auto before = d.retired.size();
    std::erase_if(d.retired, [&](const routing::retired_binding& r) {
      return std::find(done.begin(), done.end(), r) != done.end();
    });
    return changed || d.retired.size() != before;
  }, entry);
  if (auto* f = std::get_if<bus::bus_error>(&updated)) return *f;
  if (done.empty() || std::get<update_status>(updated) == update_status::absent) return true;
  if (auto failed = converge_consumer(b, bus, queue, entry)) return *failed;
  return true;
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
  // Its kind, read before it goes, spells the filters of the bindings it retires.
  std::optional<routing::exchange_kind> kind;
  if (auto current = bus.kv_get(key)) {
    if (auto def = routing::parse_exchange(current->value)) kind = def->kind;
  } else if (current.error().kind != bus::bus_errc::not_found) {
    return current.error();
  }
  if (auto f = delete_key(bus, key)) return f;
  return drop_exchange_bindings(b, bus, parsed->name, kind);
}

std::variant<std::uint64_t, bus::bus_error> pending_messages(broker& b, bus::client& bus, const std::string& queue) {
  auto info = bus.queue_info(routing::consumer_name(queue));
  if (info) return message_count(b, bus, queue, *info);
  if (info.error().kind == bus::bus_errc::not_found) return std::uint64_t{0};
  return info.error();
}

std::variant<std::uint64_t, bus::bus_error> message_count(broker& b, bus::client& bus, const std::string& queue, const bus::queue_info& info) {
  const auto windows = b.read_topology([&](const routing::topology& t) { return t.queue_windows(queue); });
  const bool windowed =
      std::any_of(windows.begin(), windows.end(), [](const auto& w) { return w.after != 0 || w.until != 0; });
  if (!windowed) return info.ready();
  const std::uint64_t passed = info.delivered_stream_seq;
  std::set<std::uint64_t> outside;  // a message two windows' filters match is walked twice
  // Walks the messages from `from` up to `to` (0: the stream's end) that `w` could route.
  auto walk = [&](const routing::route_window& w, std::uint64_t from, std::uint64_t to) -> std::optional<bus::bus_error> {
    while (to == 0 || from <= to) {
      auto next = bus.next_message(from, w.filters);
      if (!next) return next.error();
      if (!*next || (to != 0 && (*next)->seq > to)) break;
      if (!routing::admitted(windows, (*next)->subject, (*next)->seq)) outside.insert((*next)->seq);
      from = (*next)->seq + 1;
    }
    return std::nullopt;
  };
  for (const auto& w : windows) {
    if (w.after > passed)
      if (auto f = walk(w, passed + 1, w.after)) return *f;
    if (w.until != 0)
      if (auto f = walk(w, std::max(passed, w.until) + 1, 0)) return *f;
  }
  const std::uint64_t undelivered = info.num_pending;
  return undelivered - std::min<std::uint64_t>(undelivered, outside.size()) + info.requeued();
}

std::variant<std::uint64_t, bus::bus_error> purge(broker& b, bus::client& bus, const std::string& queue) {
  auto info = bus.queue_info(routing::consumer_name(queue));
  if (!info) return info.error();
  auto count = message_count(b, bus, queue, *info);
  if (std::holds_alternative<bus::bus_error>(count)) return count;
  // Nothing ready: the deliveries awaiting an ack stay the channel's, as RabbitMQ's purge leaves them.
  if (std::get<std::uint64_t>(count) == 0) return count;
  auto own = drop_own_messages(bus, queue);
  if (auto* f = std::get_if<bus::bus_error>(&own)) return *f;
  // A queue bound only to the default exchange is empty now. Its consumer stays: deleting it
  // and creating one of the same name at once races the server's last write of the old one's
  // state into the directory both use.
  const auto filters = b.filters_of(queue);
  if (only_own_subjects(filters, std::get<std::vector<std::string>>(own))) return count;
  if (auto purged = bus.purge_queue(routing::consumer_name(queue), filters, b.sharing_of(queue)); !purged)
    return purged.error();
  return count;
}

}  // namespace amqp::broker::store
