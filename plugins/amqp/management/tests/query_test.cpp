// How the management API shapes lists by their query string, as RabbitMQ's does.
#include <doctest/doctest.h>

#include "query.hpp"

using namespace amqp::management;
using json = nlohmann::json;

namespace {

json named(std::initializer_list<const char*> names) {
  json items = json::array();
  int i = 0;
  for (const char* n : names) items.push_back({{"name", n}, {"messages", i++}, {"vhost", "/"}, {"nested", {{"a", i}}}});
  return items;
}

}  // namespace

TEST_CASE("management query: a query string is split and percent-decoded, '+' a space") {
  auto q = parse_query("columns=name,messages&name=a%2Fb+c&use_regex");
  CHECK(q.at("columns") == "name,messages");
  CHECK(q.at("name") == "a/b c");
  CHECK(q.at("use_regex").empty());
  CHECK(percent_decode("%2F") == "/");
  CHECK(percent_decode("a+b") == "a+b");  // in a path '+' stays itself
  CHECK(percent_decode("100%") == "100%");
}

TEST_CASE("management query: without a page the list stays a list, and columns keep dotted fields") {
  auto shaped = shape_list(named({"a", "b"}), parse_query("columns=name,nested.a"));
  REQUIRE_FALSE(shaped.bad_request);
  REQUIRE(shaped.body.is_array());
  CHECK(shaped.body[0] == json{{"name", "a"}, {"nested", {{"a", 1}}}});
}

// Found by management_fuzz (fuzz/corpus/columns_without_keys): a column of dots only took the last
// key of none, undefined behaviour that crashed the process.
TEST_CASE("management query: a column or sort of no keys names nothing") {
  auto shaped = shape_list(named({"b", "a"}), parse_query("columns=name,.,..&sort=."));
  REQUIRE_FALSE(shaped.bad_request);
  CHECK(shaped.body == json::array({{{"name", "b"}}, {{"name", "a"}}}));
  CHECK(keep_columns(named({"a"})[0], parse_query("columns=.")) == json::object());
}

TEST_CASE("management query: name filters by substring, or by regular expression with use_regex") {
  auto sub = shape_list(named({"orders", "orders-dlq", "audit"}), parse_query("name=orders"));
  CHECK(sub.body.size() == 2);
  auto re = shape_list(named({"orders", "orders-dlq", "audit"}), parse_query("name=%5Eorders%24&use_regex=true"));
  REQUIRE(re.body.size() == 1);
  CHECK(re.body[0]["name"] == "orders");
  auto bad = shape_list(named({"a"}), parse_query("name=(&use_regex=true"));
  CHECK(bad.bad_request);
}

TEST_CASE("management query: a page is RabbitMQ's page object, sorted as asked") {
  auto shaped = shape_list(named({"c", "a", "b", "d", "e"}), parse_query("page=2&page_size=2&sort=name"));
  REQUIRE_FALSE(shaped.bad_request);
  const auto& p = shaped.body;
  CHECK(p["page"] == 2);
  CHECK(p["page_size"] == 2);
  CHECK(p["page_count"] == 3);
  CHECK(p["total_count"] == 5);
  CHECK(p["filtered_count"] == 5);
  CHECK(p["item_count"] == 2);
  CHECK(p["items"][0]["name"] == "c");
  CHECK(p["items"][1]["name"] == "d");
  auto reversed = shape_list(named({"c", "a", "b"}), parse_query("page=1&sort=name&sort_reverse=true"));
  CHECK(reversed.body["items"][0]["name"] == "c");
}

TEST_CASE("management query: bad paging is a 400 reason, naming the parameter") {
  CHECK(shape_list(named({"a"}), parse_query("page=0")).bad_request->find("page") != std::string::npos);
  CHECK(shape_list(named({"a"}), parse_query("page=1&page_size=501")).bad_request->find("500") != std::string::npos);
  CHECK(shape_list(named({"a"}), parse_query("page=3")).bad_request->find("past the last page") != std::string::npos);
}

TEST_CASE("management query: a binding's properties_key is RabbitMQ's quoting of its routing key, and back") {
  CHECK(properties_key("") == "~");
  CHECK(properties_key("a.#") == "a.%23");
  CHECK(properties_key("eu.*.x y~") == "eu.%2A.x+y%7E");
  for (const char* key : {"", "a.#", "eu.*.x y~", "plain-key_1"}) CHECK(routing_key_of(properties_key(key)) == key);
}
