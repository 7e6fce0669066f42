// The method table: facts per row, and a round trip of every row through encode and decode.
#include <algorithm>
#include <set>

#include "support.hpp"

namespace amqp::wire {
namespace {

using test::for_each_method_type;
using test::filled;
using test::through_the_wire;

TEST_CASE("every row of the method table round-trips through a frame") {
  std::size_t rows = 0;
  for_each_method_type([&]<class M>() {
    const std::string_view name = info_of(method{M{}}).name;
    CAPTURE(name);
    for (bool first : {false, true}) {
      const M sent = filled<M>(first);
      auto got = through_the_wire(sent);
      REQUIRE_MESSAGE(got.ok(), got.error().text);
      REQUIRE(std::holds_alternative<M>(*got));
      CHECK(std::get<M>(*got) == sent);
    }
    auto empty = through_the_wire(M{});
    REQUIRE(empty.ok());
    CHECK(std::get<M>(*empty) == M{});
    ++rows;
  });
  CHECK(rows == all_methods().size());
}

TEST_CASE("the variant encoder writes what the typed encoder writes") {
  for_each_method_type([&]<class M>() {
    const M m = filled<M>(true);
    std::string typed, erased;
    encode_method(typed, 3, m);
    encode_method(erased, 3, method{m});
    CHECK(typed == erased);
  });
}

TEST_CASE("method facts come from the table") {
  std::set<std::pair<std::uint16_t, std::uint16_t>> keys;
  for (const auto& info : all_methods()) {
    CHECK(keys.insert({info.key.class_id, info.key.method_id}).second);  // no duplicate ids
    CHECK(find_method(info.key) == &info);
  }
  CHECK(find_method(method_key{0, 0}) == nullptr);

  CHECK(info_of(method{basic_publish{}}).name == "basic.publish");
  CHECK(info_of(method{exchange_unbind_ok{}}).name == "exchange.unbind-ok");
  CHECK(info_of(method{exchange_delete_{}}).name == "exchange.delete");
  CHECK(info_of(method{queue_declare_ok{}}).name == "queue.declare-ok");
  CHECK(info_of(method{basic_return_{}}).name == "basic.return");
  CHECK(info_of(method{basic_publish{}}).carries_content);
  CHECK(info_of(method{basic_deliver{}}).carries_content);
  CHECK_FALSE(info_of(method{basic_ack{}}).carries_content);
  CHECK(info_of(method{queue_declare{}}).synchronous);
  CHECK_FALSE(info_of(method{queue_declare_ok{}}).synchronous);
  CHECK(info_of(method{basic_get{}}).key == basic_get::key);
  CHECK(info_of(method{std::monostate{}}).name == "(no method)");
}

TEST_CASE("the table says who sends each method: every reply is the other side's, and a few go both ways") {
  CHECK(info_of(method{basic_deliver{}}).sent_by == sender::server);
  CHECK(info_of(method{basic_publish{}}).sent_by == sender::client);
  CHECK(info_of(method{connection_start_ok{}}).sent_by == sender::client);
  CHECK(info_of(method{connection_update_secret_ok{}}).sent_by == sender::server);
  for (const auto& info : all_methods()) {
    const bool reply = info.name.ends_with("-ok");
    const bool in_both_directions = info.name == "connection.close" || info.name == "connection.close-ok" ||
                                    info.name == "channel.close" || info.name == "channel.close-ok" ||
                                    info.name == "channel.flow" || info.name == "channel.flow-ok" ||
                                    info.name == "basic.cancel" || info.name == "basic.ack" || info.name == "basic.nack";
    INFO(info.name);
    if (in_both_directions) {
      CHECK(info.sent_by == sender::both);
    } else if (info.synchronous) {  // a request: its -ok comes from the other side
      CHECK(info.sent_by != sender::both);
    } else if (reply) {
      const auto request_name = info.name.substr(0, info.name.size() - 3);
      const auto methods = all_methods();
      const auto request = std::find_if(methods.begin(), methods.end(), [&](const method_info& m) { return m.name == request_name; });
      REQUIRE(request != methods.end());
      CHECK(info.sent_by != request->sent_by);
    }
  }
}

TEST_CASE("bits share an octet, least significant first") {
  exchange_declare d;
  d.exchange = "x";
  d.type = "topic";
  d.passive = true;
  d.auto_delete = true;
  d.no_wait = true;
  std::string bytes;
  encode_method(bytes, 1, d);
  const auto f = test::only_frame(bytes);
  // class, method, reserved-1, "x", "topic", one bit octet, empty table.
  const std::string args = test::str(f.payload).substr(4);
  CHECK(args == std::string("\0\0\x01x\x05topic\x15\0\0\0\0", 15));
}

TEST_CASE("a field other than a bit closes the bit octet") {
  basic_deliver d;
  d.consumer_tag = "c";
  d.delivery_tag = 9;
  d.redelivered = true;
  d.exchange = "e";
  d.routing_key = "k";
  std::string bytes;
  encode_method(bytes, 1, d);
  const std::string args = test::str(test::only_frame(bytes).payload).substr(4);
  CHECK(args == std::string("\x01" "c" "\0\0\0\0\0\0\0\x09" "\x01" "\x01" "e" "\x01" "k", 15));

  basic_nack n;
  n.delivery_tag = 1;
  n.requeue = true;
  std::string nb;
  encode_method(nb, 1, n);
  CHECK(test::str(test::only_frame(nb).payload).substr(4) == std::string("\0\0\0\0\0\0\0\x01\x02", 9));
}

TEST_CASE("unused bits of a bit octet are ignored on decode") {
  basic_ack a;
  a.delivery_tag = 5;
  std::string bytes;
  encode_method(bytes, 1, a);
  bytes[bytes.size() - 2] = '\xFE';  // multiple=0 plus seven bits the method does not define
  auto got = decode_method(test::only_frame(bytes).payload);
  REQUIRE(got.ok());
  CHECK_FALSE(std::get<basic_ack>(*got).multiple);
}

TEST_CASE("an over-long short string is cut at a character boundary, never mis-sized") {
  channel_close c;
  c.reply_code = static_cast<std::uint16_t>(reply_code::precondition_failed);
  c.reply_text = std::string(254, 'a') + "\xC3\xA9" + "tail";  // é straddles octet 255
  auto got = through_the_wire(c);
  REQUIRE(got.ok());
  CHECK(std::get<channel_close>(*got).reply_text == std::string(254, 'a'));
}

}  // namespace
}  // namespace amqp::wire
