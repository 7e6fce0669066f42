#include "routes.hpp"

#include <nlohmann/json.hpp>

namespace cloud::host {
namespace {

using json = nlohmann::json;

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

bool under(std::string_view path, std::string_view prefix) {
  return path.rfind(prefix, 0) == 0 && (path.size() == prefix.size() || path[prefix.size()] == '/');
}

const char* state_name(row_state s) {
  switch (s) {
    case row_state::mounted: return "mounted";
    case row_state::loaded: return "lazy";
    case row_state::mounting: return "mounting";
    case row_state::failed: return "failed";
    case row_state::unloaded: break;
  }
  return "stopped";
}

http_reply error_reply(unsigned status, std::string error, std::string_view path) {
  return {status, json{{"error", std::move(error)}, {"path", path}}.dump()};
}

http_reply overall_health(const application& app) {
  json services = json::array();
  for (const auto& row : app.apps().rows) {
    json service{{"service", row.name}, {"state", state_name(app.state(row.index))}};
    // A capability that launches or dials a server publishes its version (host_services.hpp).
    if (auto version = app.shared().lookup(row.name, "server_version")) service["server_version"] = *version;
    services.push_back(std::move(service));
  }
  json degraded = json::array();
  for (const auto& d : app.shared().degraded()) {
    degraded.push_back({{"service", d.service}, {"reason", d.reason}});
  }
  const bool ok = degraded.empty();
  return {200, json{{"status", ok ? "ok" : "degraded"}, {"services", services}, {"degraded", degraded}}
                   .dump()};
}

// Under a row's prefix: the row is mounted (or failed) by now; plugins register no routes.
http_reply row_request(const application& app, const manifest::row& row, std::string_view path) {
  if (app.state(row.index) != row_state::mounted) {
    return error_reply(503, row.name + " is not mounted; see /v1/health for the reason", path);
  }
  return error_reply(404, "no route " + std::string{path} + " in " + row.name, path);
}

}  // namespace

std::optional<std::size_t> lazy_row_for(const application& app, std::string_view path) {
  path = path_of(path);
  for (const auto& row : app.apps().rows) {
    if (row.eager) continue;
    for (const auto& prefix : row.prefixes) {
      if (under(path, prefix)) return row.index;
    }
  }
  return std::nullopt;
}

http_reply answer(const application& app, std::string_view method, std::string_view target) {
  const auto path = path_of(target);
  if (method != "GET") return error_reply(405, "method not allowed; only GET is served", path);
  if (path == "/v1/health") return overall_health(app);
  for (const auto& row : app.apps().rows) {
    // Liveness of the process, not of the capability (HIP-1326, "It mounts one HTTP route, and
    // does not serve it"): constant for every row.
    if (path == "/v1/" + row.name + "/health") {
      return {200, json{{"service", row.name}, {"status", "ok"}}.dump()};
    }
  }
  for (const auto& row : app.apps().rows) {
    for (const auto& prefix : row.prefixes) {
      if (under(path, prefix)) return row_request(app, row, path);
    }
  }
  return error_reply(404, "not found", path);
}

}  // namespace cloud::host
