#include "amqp/routing/topology.hpp"

#include <algorithm>

#include "amqp/routing/filters.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/routing/policy.hpp"

namespace amqp::routing {
namespace {

// The exchanges every broker has. Never stored in the bucket; a put for them is ignored.
const std::map<std::string, exchange_def, std::less<>>& standard_exchanges() {
  static const std::map<std::string, exchange_def, std::less<>> table{
      {"", {exchange_kind::direct, true, false, false}},
      {"amq.direct", {exchange_kind::direct, true, false, false}},
      {"amq.fanout", {exchange_kind::fanout, true, false, false}},
      {"amq.topic", {exchange_kind::topic, true, false, false}},
  };
  return table;
}

// Adds `delta` (±1) to a counter, dropping it at zero so emptiness means "nothing bound".
void count(std::map<std::string, std::size_t, std::less<>>& counts, std::string_view name, int delta) {
  auto it = counts.find(name);
  if (delta > 0) {
    if (it == counts.end()) it = counts.emplace(std::string(name), 0).first;
    ++it->second;
    return;
  }
  if (it != counts.end() && --it->second == 0) counts.erase(it);
}

bool matches_any(const std::vector<std::string>& filters, std::string_view subject) {
  return std::any_of(filters.begin(), filters.end(), [&](const std::string& f) { return subject_matches(f, subject); });
}

bool key_reaches(exchange_kind kind, std::string_view exchange, std::string_view binding_key,
                 const std::string& subject) {
  auto filters = binding_filters(exchange, kind, binding_key);
  return filters && matches_any(*filters, subject);
}

}  // namespace

topology::topology() = default;

std::optional<wire::refusal> topology::apply(std::string_view key, std::optional<std::string_view> json) {
  auto parsed = parse_bucket_key(key);
  if (!parsed) {
    return wire::refusal{wire::reply_code::internal_error,
                         "topology bucket key '" + std::string(key) +
                             "' is neither x.<exchange> nor q.<queue> with a valid name; ignored"};
  }
  if (parsed->what == bucket_key::kind::use) return std::nullopt;
  if (parsed->what == bucket_key::kind::exchange) {
    if (!json) {
      erase_exchange(parsed->name);
      return std::nullopt;
    }
    auto def = parse_exchange(*json);
    if (!def) return def.error();
    put_exchange(parsed->name, *def);
    return std::nullopt;
  }
  if (parsed->what == bucket_key::kind::policy) {
    if (!json) {
      erase_policy(parsed->name);
      return std::nullopt;
    }
    // Read in the most permissive mode: the writer checked the names under its own.
    auto p = parse_policy(*json, name_rules::escaped);
    if (!p) return wire::refusal{wire::reply_code::internal_error, "malformed policy in the topology bucket: " + p.error().text};
    auto compiled = compile(std::move(*p));
    if (!compiled) return wire::refusal{wire::reply_code::internal_error, "malformed policy in the topology bucket: its pattern"};
    put_policy(parsed->name, std::move(*compiled));
    return std::nullopt;
  }
  if (!json) {
    erase_queue(parsed->name);
    return std::nullopt;
  }
  auto def = parse_queue(*json);
  if (!def) return def.error();
  put_queue(parsed->name, std::move(*def));
  return std::nullopt;
}

bool topology::put_exchange(std::string_view name, exchange_def def) {
  if (is_standard_exchange(name)) return false;
  auto it = exchanges_.find(name);
  if (it == exchanges_.end()) {
    exchanges_.emplace(std::string(name), def);
  } else {
    it->second = def;
  }
  return true;
}

bool topology::erase_exchange(std::string_view name) {
  auto it = exchanges_.find(name);
  if (it == exchanges_.end()) return false;
  exchanges_.erase(it);
  return true;
}

void topology::put_queue(std::string_view name, queue_def def) { settle_queue(name, std::move(def)); }

bool topology::erase_queue(std::string_view name) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return false;
  unindex_queue(name, it->second);
  tally(name, it->second, false);
  queues_.erase(it);
  if (auto d = declared_.find(name); d != declared_.end()) declared_.erase(d);
  if (auto p = policy_of_.find(name); p != policy_of_.end()) policy_of_.erase(p);
  return true;
}

const topology::policy_map::value_type* topology::policy_for(std::string_view queue) const {
  const policy_map::value_type* best = nullptr;
  auto before = [](const policy_map::value_type& a, const policy_map::value_type& b) {
    const auto& x = a.second->rules;
    const auto& y = b.second->rules;
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.apply_to != y.apply_to) return x.apply_to == policy_target::queues;
    return a.first < b.first;
  };
  for (const auto& entry : policies_)
    if (entry.second->matches_queue(queue) && (!best || before(entry, *best))) best = &entry;
  return best;
}

bool topology::settle_queue(std::string_view name, queue_def declared) {
  const auto* applied = policy_for(name);
  std::optional<queue_def> kept;  // what was declared, where the policy changed it
  queue_def working = applied ? with_policy(declared, applied->second->rules) : declared;
  // RabbitMQ 4 bounds a quorum queue's redeliveries even when nothing set a limit.
  if (working.type() == queue_type::quorum && !working.delivery_limit && !working.unlimited_deliveries)
    working.delivery_limit = quorum_default_delivery_limit;
  if (working != declared) kept = std::move(declared);
  auto it = queues_.find(name);
  bool changed = true;
  if (it == queues_.end()) {
    it = queues_.emplace(std::string(name), queue_def{}).first;
  } else if (it->second == working) {
    changed = false;
  } else {
    unindex_queue(name, it->second);
    tally(name, it->second, false);
  }
  if (changed) {
    it->second = std::move(working);
    tally(name, it->second, true);
    index_queue(name, it->second);
  }
  if (kept) {
    declared_.insert_or_assign(std::string(name), std::move(*kept));
  } else if (auto d = declared_.find(name); d != declared_.end()) {
    declared_.erase(d);
  }
  if (applied) {
    policy_of_.insert_or_assign(std::string(name), applied->first);
  } else if (auto p = policy_of_.find(name); p != policy_of_.end()) {
    policy_of_.erase(p);
  }
  return changed;
}

std::vector<std::string> topology::settle_all_queues() {
  std::vector<std::string> changed;
  std::vector<std::string> names;
  names.reserve(queues_.size());
  for (const auto& entry : queues_) names.push_back(entry.first);
  for (const auto& name : names) {
    queue_def declared = *find_declared(name);
    if (settle_queue(name, std::move(declared))) changed.push_back(name);
  }
  return changed;
}

std::vector<std::string> topology::put_policy(std::string_view name, compiled_policy p) {
  policies_.insert_or_assign(std::string(name), std::make_shared<const compiled_policy>(std::move(p)));
  return settle_all_queues();
}

std::vector<std::string> topology::erase_policy(std::string_view name) {
  auto it = policies_.find(name);
  if (it == policies_.end()) return {};
  policies_.erase(it);
  return settle_all_queues();
}

const queue_def* topology::find_declared(std::string_view name) const {
  if (auto d = declared_.find(name); d != declared_.end()) return &d->second;
  return find_queue(name);
}

const std::string* topology::policy_of(std::string_view queue) const {
  auto it = policy_of_.find(queue);
  return it == policy_of_.end() ? nullptr : &it->second;
}

std::string_view type_name(const exchange_def& def) {
  return def.delayed ? delayed_exchange_type : to_string(def.kind);
}

std::string_view to_string(overflow_mode mode) {
  switch (mode) {
    case overflow_mode::drop_head: return "drop-head";
    case overflow_mode::reject_publish: return "reject-publish";
    case overflow_mode::reject_publish_dlx: return "reject-publish-dlx";
  }
  return "drop-head";
}

std::optional<overflow_mode> parse_overflow(std::string_view text) {
  for (auto mode : {overflow_mode::drop_head, overflow_mode::reject_publish, overflow_mode::reject_publish_dlx})
    if (text == to_string(mode)) return mode;
  return std::nullopt;
}

std::string_view to_string(queue_type type) {
  switch (type) {
    case queue_type::quorum: return "quorum";
    case queue_type::stream: return "stream";
    case queue_type::classic: break;
  }
  return "classic";
}

std::optional<queue_type> parse_queue_type(std::string_view text) {
  for (auto type : {queue_type::classic, queue_type::quorum, queue_type::stream})
    if (text == to_string(type)) return type;
  return std::nullopt;
}

std::map<std::string, exchange_def, std::less<>> topology::exchanges() const {
  auto all = exchanges_;
  all.insert(standard_exchanges().begin(), standard_exchanges().end());
  return all;
}

const exchange_def* topology::find_exchange(std::string_view name) const {
  const auto& standard = standard_exchanges();
  if (auto it = standard.find(name); it != standard.end()) return &it->second;
  auto it = exchanges_.find(name);
  return it == exchanges_.end() ? nullptr : &it->second;
}

const queue_def* topology::find_queue(std::string_view name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

std::vector<std::string> topology::queue_filters(std::string_view queue) const {
  if (!find_queue(queue)) return {};
  // The default exchange's binding is derived from the name, never stored.
  auto own = binding_filters("", exchange_kind::direct, queue);
  return own ? std::move(*own) : std::vector<std::string>{};
}

bool topology::routable(std::string_view exchange, std::string_view routing_key) const {
  const exchange_def* def = find_exchange(exchange);
  if (!def) return false;
  auto subject = publish_subject(exchange, routing_key);
  if (!subject) return false;
  if (exchange.empty() && find_queue(routing_key)) return true;  // the derived default binding
  const exchange_index* index = index_of(exchange);
  if (!index || index->keys.empty()) return false;
  switch (def->kind) {
    case exchange_kind::fanout:
      return true;
    case exchange_kind::direct:
      return index->keys.contains(routing_key);
    case exchange_kind::topic:
      return std::any_of(index->keys.begin(), index->keys.end(), [&](const auto& entry) {
        return key_reaches(def->kind, exchange, entry.first, *subject);
      });
  }
  return false;
}

std::vector<std::string> topology::queues_reached(std::string_view exchange, std::string_view routing_key) const {
  std::vector<std::string> reached;
  const exchange_def* def = find_exchange(exchange);
  auto subject = publish_subject(exchange, routing_key);
  if (!def || !subject) return reached;
  if (exchange.empty()) {
    if (find_queue(routing_key)) reached.emplace_back(routing_key);
    return reached;
  }
  const exchange_index* index = index_of(exchange);
  if (!index) return reached;
  auto add = [&](const counted_names& queues) {
    for (const auto& entry : queues) reached.push_back(entry.first);
  };
  switch (def->kind) {
    case exchange_kind::fanout:
      add(index->queues);
      return reached;
    case exchange_kind::direct:
      if (auto it = index->keys.find(routing_key); it != index->keys.end()) add(it->second);
      return reached;
    case exchange_kind::topic:
      for (const auto& [key, queues] : index->keys)
        if (key_reaches(def->kind, exchange, key, *subject)) add(queues);
      // A queue bound by several matching keys is reached once.
      std::sort(reached.begin(), reached.end());
      reached.erase(std::unique(reached.begin(), reached.end()), reached.end());
      return reached;
  }
  return reached;
}

std::vector<std::string> topology::queues_bound_to(std::string_view exchange) const {
  std::vector<std::string> names;
  if (const exchange_index* index = index_of(exchange)) {
    for (const auto& entry : index->queues) names.push_back(entry.first);
  }
  return names;
}

bool topology::has_bindings(std::string_view exchange) const {
  const exchange_index* index = index_of(exchange);
  return index && !index->queues.empty();
}

void topology::tally(std::string_view queue, const queue_def& def, bool added) {
  const auto step = [added](std::size_t& n) { n = added ? n + 1 : n - 1; };
  if (def.max_length) step(length_limited_);
  if (def.message_ttl || def.dead_letter) step(timed_);
  if (def.type() != queue_type::stream) return;
  if (added) {
    stream_queues_.emplace(queue);
  } else if (auto it = stream_queues_.find(queue); it != stream_queues_.end()) {
    stream_queues_.erase(it);
  }
}

void topology::index_queue(std::string_view queue, const queue_def& def) {
  for (const auto& b : def.bindings) {
    auto& index = index_[b.exchange];
    count(index.keys[b.key], queue, +1);
    count(index.queues, queue, +1);
  }
}

void topology::unindex_queue(std::string_view queue, const queue_def& def) {
  for (const auto& b : def.bindings) {
    auto it = index_.find(b.exchange);
    if (it == index_.end()) continue;
    if (auto key = it->second.keys.find(b.key); key != it->second.keys.end()) {
      count(key->second, queue, -1);
      if (key->second.empty()) it->second.keys.erase(key);
    }
    count(it->second.queues, queue, -1);
    if (it->second.queues.empty()) index_.erase(it);
  }
}

const topology::exchange_index* topology::index_of(std::string_view exchange) const {
  auto it = index_.find(exchange);
  return it == index_.end() ? nullptr : &it->second;
}

}  // namespace amqp::routing
