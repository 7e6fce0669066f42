// The API's paths, RabbitMQ 3.x's, one row each. A row's handler lives in resources/<resource>.cpp.
#include "routes.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "handlers.hpp"

namespace amqp::management {
namespace {

constexpr auto none = permission::none;

constexpr route get(std::string_view pattern, handler_fn h, permission needs = permission::read) {
  return {"GET", pattern, h, needs, true};
}
constexpr route put(std::string_view pattern, handler_fn h, permission needs = permission::write) {
  return {"PUT", pattern, h, needs, false};
}
constexpr route post(std::string_view pattern, handler_fn h) { return {"POST", pattern, h, permission::write, false}; }
constexpr route del(std::string_view pattern, handler_fn h, permission needs = permission::write) {
  return {"DELETE", pattern, h, needs, false};
}

constexpr std::array table{
    // overview.cpp
    get("/api/overview", overview),
    get("/api/whoami", whoami, none),
    get("/api/cluster-name", cluster_name, none),
    get("/api/extensions", extensions, none),
    get("/api/feature-flags", feature_flags, none),
    get("/api/nodes", nodes, none),
    get("/api/nodes/{name}", node, none),
    get("/api/healthchecks/node", health, none),
    get("/api/health/checks/{check...}", health, none),
    get("/api/aliveness-test/{vhost}", aliveness),
    // vhosts.cpp
    get("/api/vhosts", vhosts),
    get("/api/vhosts/{vhost}", one_vhost),
    get("/api/vhosts/{vhost}/connections", connections),
    // queues.cpp
    get("/api/queues", queues),
    get("/api/queues/{vhost}", queues),
    get("/api/queues/{vhost}/{name}", one_queue),
    put("/api/queues/{vhost}/{name}", declare_queue),
    del("/api/queues/{vhost}/{name}", delete_queue),
    del("/api/queues/{vhost}/{name}/contents", purge_queue),
    post("/api/queues/{vhost}/{name}/get", get_messages),
    // exchanges.cpp
    get("/api/exchanges", exchanges),
    get("/api/exchanges/{vhost}", exchanges),
    get("/api/exchanges/{vhost}/{name}", one_exchange),
    put("/api/exchanges/{vhost}/{name}", declare_exchange),
    del("/api/exchanges/{vhost}/{name}", delete_exchange),
    post("/api/exchanges/{vhost}/{name}/publish", publish),
    // bindings.cpp
    get("/api/bindings", bindings),
    get("/api/bindings/{vhost}", bindings),
    get("/api/queues/{vhost}/{name}/bindings", queue_bindings),
    get("/api/exchanges/{vhost}/{name}/bindings/source", exchange_bindings_source),
    get("/api/exchanges/{vhost}/{name}/bindings/destination", exchange_bindings_destination),
    get("/api/bindings/{vhost}/e/{source}/q/{destination}", bindings_between),
    post("/api/bindings/{vhost}/e/{source}/q/{destination}", bind_queue),
    get("/api/bindings/{vhost}/e/{source}/q/{destination}/{props}", one_binding),
    del("/api/bindings/{vhost}/e/{source}/q/{destination}/{props}", unbind_queue),
    // clients.cpp
    get("/api/connections", connections),
    get("/api/connections/{name}", one_connection),
    get("/api/channels", channels),
    get("/api/consumers", consumers),
    get("/api/consumers/{vhost}", consumers),
    // policies.cpp: parameters and operator policies are answered, none being set; a write of one
    // changes nothing, so a parameter's needs nothing of its vhost but that it is served.
    get("/api/policies", policies),
    get("/api/policies/{vhost}", policies),
    get("/api/policies/{vhost}/{name}", one_policy),
    put("/api/policies/{vhost}/{name}", change_policy),
    del("/api/policies/{vhost}/{name}", change_policy),
    get("/api/operator-policies", none_set),
    get("/api/operator-policies/{vhost}", none_set),
    get("/api/operator-policies/{vhost}/{name}", not_set),
    put("/api/operator-policies/{vhost}/{name}", put_operator_policy),
    del("/api/operator-policies/{vhost}/{name}", not_set),
    get("/api/parameters", none_set),
    get("/api/parameters/{component}", none_set),
    get("/api/parameters/{component}/{vhost}", none_set),
    get("/api/parameters/{component}/{vhost}/{name}", not_set),
    put("/api/parameters/{component}/{vhost}/{name}", put_parameter, none),
    del("/api/parameters/{component}/{vhost}/{name}", not_set, none),
    // import_export.cpp
    get("/api/definitions", export_file),
    get("/api/definitions/{vhost}", export_file),
    post("/api/definitions", import_file),
    post("/api/definitions/{vhost}", import_file),
};

// The segments of a pattern after "/api/".
std::vector<std::string_view> segments(std::string_view pattern) {
  pattern.remove_prefix(std::string_view("/api/").size());
  std::vector<std::string_view> out;
  for (std::size_t start = 0;;) {
    const auto slash = pattern.find('/', start);
    out.push_back(pattern.substr(start, slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

// The path's captures when `pattern` has it; a "{name...}" segment takes one or more segments.
std::optional<captures> fits(std::string_view pattern, const std::vector<std::string>& path) {
  const auto want = segments(pattern);
  captures got;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto w = want[i];
    if (i >= path.size()) return std::nullopt;
    if (!w.starts_with('{')) {
      if (w != path[i]) return std::nullopt;
      continue;
    }
    const auto name = w.substr(1, w.size() - 2);
    if (name.ends_with("...")) {
      got.named.emplace_back(name.substr(0, name.size() - 3), path[i]);
      return got;
    }
    got.named.emplace_back(name, path[i]);
  }
  if (path.size() != want.size()) return std::nullopt;
  return got;
}

// "GET, HEAD" for a read, else the method itself, once each.
void add_allowed(std::string& allow, const route& row) {
  const std::string method = row.read_only ? "GET, HEAD" : std::string(row.method);
  if (allow.find(method) != std::string::npos) return;
  allow += (allow.empty() ? "" : ", ") + method;
}

}  // namespace

std::span<const route> routes() { return table; }

const std::string* captures::find(std::string_view name) const {
  for (const auto& [n, value] : named)
    if (n == name) return &value;
  return nullptr;
}

const std::string& captures::at(std::string_view name) const {
  if (const auto* value = find(name)) return *value;
  throw std::logic_error("the route's pattern has no {" + std::string(name) + "}");
}

matched match(std::string_view method, const std::vector<std::string>& path) {
  matched m;
  for (const auto& row : table) {
    auto got = fits(row.pattern, path);
    if (!got) continue;
    if (row.method == method || (method == "HEAD" && row.read_only)) {
      m.row = &row;
      m.args = std::move(*got);
      return m;
    }
    add_allowed(m.allow, row);
  }
  return m;
}

reply refusal(const matched& m) {
  if (m.allow.empty()) return not_found();
  auto refused = error_reply(405, "Method Not Allowed", "Method Not Allowed");
  refused.allow = m.allow;
  return refused;
}

std::optional<reply> vhost_refusal(permission needs, bool exists, bool may_use) {
  if (!exists) return not_found();
  if (needs != permission::none && !may_use) return refused_vhost();
  return std::nullopt;
}

std::optional<request> parse_target(std::string_view target, std::string_view prefix) {
  const auto question = target.find('?');
  std::string_view path = target.substr(0, question);
  request r;
  if (question != std::string_view::npos) r.query = parse_query(target.substr(question + 1));
  if (!path.starts_with(prefix)) return std::nullopt;
  path.remove_prefix(prefix.size());
  std::size_t start = 0;
  while (start < path.size()) {
    auto slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    r.path.push_back(percent_decode(path.substr(start, slash - start)));
    start = slash + 1;
  }
  // One trailing slash names the same thing ("queues/" is "queues"), as RabbitMQ reads a path.
  return r;
}

}  // namespace amqp::management
