// Replies in RabbitMQ's shapes, and a refused AMQP method as RabbitMQ's management plugin answers it.
#include <doctest/doctest.h>

#include "replies.hpp"

using namespace amqp;
using namespace amqp::management;
using json = nlohmann::json;

namespace {

std::pair<unsigned, json> seen(const reply& r) { return {r.status, r.body.empty() ? json() : json::parse(r.body)}; }

}  // namespace

TEST_CASE("replies: errors are {error, reason}, as RabbitMQ's") {
  CHECK(seen(not_found()) == std::pair{404u, json{{"error", "Object Not Found"}, {"reason", "Not Found"}}});
  CHECK(seen(bad_request("count must be an integer, not \"x\"")) ==
        std::pair{400u, json{{"error", "bad_request"}, {"reason", "count must be an integer, not \"x\""}}});
  CHECK(seen(refused_vhost()) ==
        std::pair{401u, json{{"error", "not_authorised"}, {"reason", "User not authorised to access virtual host"}}});
  CHECK(no_content().status == 204);
  CHECK(no_content().body.empty());
  CHECK(created().status == 201);
  CHECK(json_reply(200, json{{"a", 1}}).content_type == "application/json");
}

TEST_CASE("replies: a refused method is 404, 403 or 400 with the broker's text, and no answer is 504 or 500") {
  const auto missing = refused_reply(wire::refusal{wire::reply_code::not_found, "NOT_FOUND - no queue 'q'"}, false, "queue.delete");
  CHECK(seen(missing) == std::pair{404u, json{{"error", "not_found"}, {"reason", "NOT_FOUND - no queue 'q'"}}});
  const auto denied = refused_reply(wire::refusal{wire::reply_code::access_refused, "ACCESS_REFUSED"}, false, "queue.declare");
  CHECK(seen(denied) == std::pair{403u, json{{"error", "access_refused"}, {"reason", "ACCESS_REFUSED"}}});
  const auto unequal = refused_reply(wire::refusal{wire::reply_code::precondition_failed, "PRECONDITION_FAILED - x"}, false, "q");
  CHECK(seen(unequal) == std::pair{400u, json{{"error", "bad_request"}, {"reason", "PRECONDITION_FAILED - x"}}});
  CHECK(seen(refused_reply(std::nullopt, true, "basic.get")) ==
        std::pair{504u, json{{"error", "timeout"}, {"reason", "basic.get: the broker did not answer in time"}}});
  CHECK(refused_reply(std::nullopt, false, "basic.get").status == 500);
}

// Found by management_fuzz (fuzz/corpus/query_not_utf8): a query's percent-decoded octets named in
// a reason made dump() throw, so the 400 became a 500.
TEST_CASE("replies: a reason that is not UTF-8 is still a 400 naming the field") {
  const auto shaped = shape_list(json::array(), parse_query("page=%FF"));
  REQUIRE(shaped.bad_request);
  const auto answered = bad_request(*shaped.bad_request);
  CHECK(answered.status == 400);
  CHECK(seen(answered).second["reason"] == "page must be a positive integer, not '\xEF\xBF\xBD'");
}
