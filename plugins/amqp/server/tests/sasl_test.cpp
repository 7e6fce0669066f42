#include <doctest/doctest.h>

#include <string>

#include "amqp/wire/codec.hpp"
#include "sasl.hpp"

using namespace amqp::server;
using amqp::bus::credentials;

namespace {

credentials accepted(std::string_view mechanism, const std::string& response) {
  auto r = read_credentials(mechanism, response);
  REQUIRE(std::holds_alternative<credentials>(r));
  return std::get<credentials>(r);
}

std::string refused(std::string_view mechanism, const std::string& response) {
  auto r = read_credentials(mechanism, response);
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

// AMQPLAIN's response: a field table's entries without its length prefix.
std::string amqplain(const amqp::wire::field_table& t) {
  std::string out;
  amqp::wire::encode_table(out, t);
  return out.substr(4);
}

}  // namespace

TEST_CASE("PLAIN: user and password after an optional authorization identity") {
  using namespace std::string_literals;
  CHECK(accepted("PLAIN", "\0alice\0s3cret"s) == credentials{"alice", "s3cret"});
  CHECK(accepted("PLAIN", "admin\0alice\0s3cret"s) == credentials{"alice", "s3cret"});
  CHECK(accepted("PLAIN", "\0\0eyJ.token"s) == credentials{"", "eyJ.token"});  // a token alone
  CHECK(accepted("PLAIN", "\0alice\0"s) == credentials{"alice", ""});
  for (const auto& bad : {""s, "alice"s, "\0alice"s, "\0a\0b\0c"s}) {
    CAPTURE(bad);
    CHECK(refused("PLAIN", bad).find("PLAIN response") != std::string::npos);
  }
}

TEST_CASE("AMQPLAIN: LOGIN and PASSWORD strings of a field table") {
  amqp::wire::field_table t;
  t.entries.push_back({"LOGIN", {std::string("bob")}});
  t.entries.push_back({"PASSWORD", {std::string("pw")}});
  CHECK(accepted("AMQPLAIN", amqplain(t)) == credentials{"bob", "pw"});
  amqp::wire::field_table no_password;
  no_password.entries.push_back({"LOGIN", {std::string("bob")}});
  CHECK(refused("AMQPLAIN", amqplain(no_password)).find("no PASSWORD") != std::string::npos);
  amqp::wire::field_table number;
  number.entries.push_back({"LOGIN", {std::int32_t{7}}});
  number.entries.push_back({"PASSWORD", {std::string("pw")}});
  CHECK(refused("AMQPLAIN", amqplain(number)).find("no LOGIN") != std::string::npos);
  CHECK(refused("AMQPLAIN", "\x05LOGIN").find("not a field table") != std::string::npos);
}

TEST_CASE("a mechanism that is not offered is named") {
  CHECK(refused("EXTERNAL", "") == "SASL mechanism 'EXTERNAL' is not offered; use PLAIN or AMQPLAIN");
}
