// The route table: every row is reached by its own path, and what no row takes is RabbitMQ's 404 or 405.
#include <doctest/doctest.h>

#include <set>

#include "handlers.hpp"
#include "routes.hpp"

using namespace amqp::management;
using json = nlohmann::json;

namespace {

// A concrete path for a pattern: each {name} becomes "<name>-value", and a {name...} two segments.
std::vector<std::string> concrete(std::string_view pattern) {
  std::vector<std::string> path;
  pattern.remove_prefix(std::string_view("/api/").size());
  for (std::size_t start = 0; start <= pattern.size();) {
    auto slash = pattern.find('/', start);
    if (slash == std::string_view::npos) slash = pattern.size();
    std::string segment(pattern.substr(start, slash - start));
    if (segment.ends_with("...}")) {
      path.push_back(segment.substr(1, segment.size() - 5) + "-value");
      path.push_back("deeper");
    } else if (segment.starts_with('{')) {
      path.push_back(segment.substr(1, segment.size() - 2) + "-value");
    } else {
      path.push_back(segment);
    }
    start = slash + 1;
  }
  return path;
}

json body_of(const reply& r) { return json::parse(r.body); }

}  // namespace

TEST_CASE("routes: every row is matched by a path built from its pattern, with its captures") {
  for (const auto& row : routes()) {
    CAPTURE(row.method);
    CAPTURE(row.pattern);
    const auto path = concrete(row.pattern);
    const auto m = match(row.method, path);
    REQUIRE(m.row == &row);
    for (const auto& [name, value] : m.args.named) CHECK(value == std::string(name) + "-value");
    if (row.read_only) CHECK(match("HEAD", path).row == &row);
  }
}

TEST_CASE("routes: a method no row of a path takes is 405 with the path's methods, RabbitMQ's JSON") {
  for (const auto& row : routes()) {
    CAPTURE(row.pattern);
    const auto m = match("PATCH", concrete(row.pattern));
    CHECK(m.row == nullptr);
    CHECK(m.allow.find(row.method) != std::string::npos);
    const auto refused = refusal(m);
    CHECK(refused.status == 405);
    CHECK(refused.allow == m.allow);
    CHECK(body_of(refused) == json{{"error", "Method Not Allowed"}, {"reason", "Method Not Allowed"}});
  }
  CHECK(match("PATCH", {"queues", "/", "q"}).allow == "GET, HEAD, PUT, DELETE");
  CHECK(match("POST", {"overview"}).allow == "GET, HEAD");
  CHECK(match("GET", {"queues", "/", "q", "get"}).allow == "POST");
  CHECK(match("GET", {"queues", "/", "q", "contents"}).allow == "DELETE");
  CHECK(match("PUT", {"bindings", "/", "e", "x", "q", "q"}).allow == "GET, HEAD, POST");
  CHECK(match("HEAD", {"queues", "/", "q", "get"}).allow == "POST");  // HEAD only where GET is
}

TEST_CASE("routes: a path no row has is 404, whatever the method") {
  for (const auto& row : routes()) {
    auto path = concrete(row.pattern);
    path.front() = "no-such-resource";
    const auto m = match(row.method, path);
    CHECK(m.row == nullptr);
    CHECK(m.allow.empty());
  }
  const std::vector<std::vector<std::string>> unknown = {
      {"users"},          {"permissions"}, {"users", "guest"}, {"queues", "/", "q", "nosuch"},
      {"health", "checks"}, {"aliveness-test"}, {"exchanges", "/", "x", "bindings", "sideways"},
      {"queues", "/", "q", "bindings", "more"}, {"bindings", "/", "x", "x", "q", "q"}};
  for (const auto& path : unknown) {
    for (const char* method : {"GET", "PUT", "POST", "DELETE"}) {
      const auto refused = refusal(match(method, path));
      CHECK(refused.status == 404);
      CHECK(refused.allow.empty());
      CHECK(body_of(refused) == json{{"error", "Object Not Found"}, {"reason", "Not Found"}});
    }
  }
}

TEST_CASE("routes: each method and pattern is one row, under /api/, and a read is a GET") {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const auto& row : routes()) {
    CAPTURE(row.pattern);
    CHECK(row.pattern.starts_with("/api/"));
    CHECK(seen.emplace(row.method, row.pattern).second);
    CHECK(row.read_only == (row.method == "GET"));
    CHECK(static_cast<bool>(row.answer));
  }
}

TEST_CASE("routes: a write needs the user's bus client in its vhost, but for a write that changes nothing") {
  for (const auto& row : routes()) {
    CAPTURE(row.method);
    CAPTURE(row.pattern);
    const bool has_vhost = row.pattern.find("{vhost}") != std::string_view::npos;
    if (!row.read_only) {
      const bool refused_anyway = row.pattern.starts_with("/api/parameters/");
      CHECK(row.needs == (refused_anyway ? permission::none : permission::write));
    }
    if (!has_vhost) continue;
    // A vhost not served is 404 for every row; one the user may not use is 401 unless the row needs nothing.
    const auto missing = vhost_refusal(row.needs, false, false);
    REQUIRE(missing);
    CHECK(missing->status == 404);
    CHECK(body_of(*missing) == json{{"error", "Object Not Found"}, {"reason", "Not Found"}});
    const auto other = vhost_refusal(row.needs, true, false);
    if (row.needs == permission::none) {
      CHECK_FALSE(other);
    } else {
      REQUIRE(other);
      CHECK(other->status == 401);
      CHECK(body_of(*other) == json{{"error", "not_authorised"}, {"reason", "User not authorised to access virtual host"}});
    }
    CHECK_FALSE(vhost_refusal(row.needs, true, true));
  }
  auto needs = [](std::string_view method, std::vector<std::string> path) { return match(method, path).row->needs; };
  CHECK(needs("GET", {"whoami"}) == permission::none);
  CHECK(needs("GET", {"health", "checks", "alarms"}) == permission::none);
  CHECK(needs("GET", {"overview"}) == permission::read);
  CHECK(needs("GET", {"queues", "/"}) == permission::read);
  CHECK(needs("POST", {"queues", "/", "q", "get"}) == permission::write);
  CHECK(needs("POST", {"definitions"}) == permission::write);
}

TEST_CASE("routes: segments are percent-decoded as RabbitMQ reads them, and captured as they are") {
  auto r = parse_target("/api/queues/%2F/a%20b+c?columns=name&page=2", "/api/");
  REQUIRE(r);
  CHECK(r->path == std::vector<std::string>{"queues", "/", "a b+c"});  // '+' is a space in a query only
  CHECK(r->query.at("columns") == "name");
  CHECK(r->query.at("page") == "2");
  const auto m = match("GET", r->path);
  REQUIRE(m.row);
  CHECK(m.row->pattern == "/api/queues/{vhost}/{name}");
  CHECK(m.args.at("vhost") == "/");
  CHECK(m.args.at("name") == "a b+c");
  CHECK(parse_target("/api/queues/", "/api/")->path == std::vector<std::string>{"queues"});
  CHECK(parse_target("/api/queues//x", "/api/")->path == std::vector<std::string>{"queues", "", "x"});
  CHECK_FALSE(parse_target("/metrics", "/api/"));
  // An empty vhost segment is a vhost name like another: no vhost is named "", so it is a 404 later.
  CHECK(match("GET", {"queues", ""}).row != nullptr);
}

TEST_CASE("routes: a health check takes the rest of the path, and the default exchange keeps its API name") {
  const auto deep = match("GET", {"health", "checks", "port-listener", "5672"});
  REQUIRE(deep.row);
  CHECK(deep.args.at("check") == "port-listener");
  const auto binding = match("DELETE", {"bindings", "/", "e", "amq.direct", "q", "q1", "a.%23"});
  REQUIRE(binding.row);
  CHECK(binding.args.at("source") == "amq.direct");
  CHECK(binding.args.at("destination") == "q1");
  CHECK(binding.args.at("props") == "a.%23");
  CHECK_THROWS_AS(binding.args.at("name"), std::logic_error);
}

TEST_CASE("routes: a handler's list is shaped by the query, and a malformed query is 400 naming the parameter") {
  request r;
  r.query = parse_query("page=0");
  const principal who{"guest", {}};
  const captures none;
  const call c{r, who, none, {}};
  const auto refused = c.list(json::array({{{"name", "a"}}}));
  CHECK(refused.status == 400);
  CHECK(body_of(refused) == json{{"error", "bad_request"}, {"reason", "page must be a positive integer, not '0'"}});
  r.query = parse_query("name=(&use_regex=true");
  CHECK(body_of(c.list(json::array()))["reason"] == "name is not a valid regular expression: '('");
  r.query = parse_query("columns=name&sort=name&sort_reverse=true");
  CHECK(body_of(c.list(json::array({{{"name", "a"}, {"x", 1}}, {{"name", "b"}, {"x", 2}}}))) ==
        json::array({{{"name", "b"}}, {{"name", "a"}}}));
}
