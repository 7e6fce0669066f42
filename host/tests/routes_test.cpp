// The HTTP answers, on an application that booted nothing (no library is loaded).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "application.hpp"
#include "routes.hpp"

using namespace cloud::host;
using nlohmann::json;

namespace {

application make_app() {
  cloud::manifest::apps apps;
  apps.rows.push_back({0, "pubsub", true, {"/v1/pubsub"}, "libcloud_pubsub.so", {}});
  apps.rows.push_back({1, "report", false, {"/v1/report"}, "libcloud_report.so", {}});
  return application{std::move(apps), "/nonexistent", std::chrono::milliseconds{1000}};
}

}  // namespace

TEST_CASE("every row's health route is a constant 200") {
  const auto app = make_app();
  for (const char* name : {"pubsub", "report"}) {
    const auto reply = answer(app, "GET", std::string{"/v1/"} + name + "/health");
    CHECK(reply.status == 200);
    CHECK(json::parse(reply.body) == json{{"service", name}, {"status", "ok"}});
  }
  CHECK(answer(app, "GET", "/v1/pubsub/health?verbose=1").status == 200);
}

TEST_CASE("/v1/health lists the rows and the degraded ones") {
  const auto app = make_app();
  auto body = json::parse(answer(app, "GET", "/v1/health").body);
  CHECK(body["status"] == "ok");
  REQUIRE(body["services"].size() == 2);
  CHECK(body["services"][0]["service"] == "pubsub");
  CHECK(body["services"][1]["service"] == "report");
  CHECK(body["degraded"].empty());
}

TEST_CASE("/v1/health shows the server_version a row published, and only where it did") {
  auto app = make_app();
  auto body = json::parse(answer(app, "GET", "/v1/health").body);
  CHECK_FALSE(body["services"][0].contains("server_version"));
  app.shared().publish("pubsub", "server_version", "2.15.2");
  app.shared().publish("pubsub", "url", "nats://127.0.0.1:4222");  // other keys stay private
  body = json::parse(answer(app, "GET", "/v1/health").body);
  CHECK(body["services"][0]["service"] == "pubsub");
  CHECK(body["services"][0]["server_version"] == "2.15.2");
  CHECK(body["services"][0].size() == 3);  // service, state, server_version: nothing else published shows
  CHECK_FALSE(body["services"][1].contains("server_version"));
}

TEST_CASE("unknown paths are a JSON 404, other methods a JSON 405") {
  const auto app = make_app();
  const auto missing = answer(app, "GET", "/nope");
  CHECK(missing.status == 404);
  CHECK(json::parse(missing.body)["path"] == "/nope");
  const auto post = answer(app, "POST", "/v1/health");
  CHECK(post.status == 405);
  CHECK(json::parse(post.body)["error"].get<std::string>().find("only GET") != std::string::npos);
}

TEST_CASE("a lazy row's prefix is recognised, eager rows are never lazily mounted") {
  const auto app = make_app();
  CHECK(lazy_row_for(app, "/v1/report/x") == std::size_t{1});
  CHECK(lazy_row_for(app, "/v1/report") == std::size_t{1});
  CHECK_FALSE(lazy_row_for(app, "/v1/reports"));
  CHECK_FALSE(lazy_row_for(app, "/v1/pubsub/x"));
  // Not mounted (nothing was loaded): 503 naming the row rather than a silent 404.
  CHECK(answer(app, "GET", "/v1/report/x").status == 503);
}
