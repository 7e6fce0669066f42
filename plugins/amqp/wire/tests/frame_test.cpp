// Frame boundaries: parsing, the protocol header, heartbeats, content headers, body splitting.
#include "support.hpp"

namespace amqp::wire {
namespace {

using test::octets;

TEST_CASE("the protocol header is recognised exactly") {
  CHECK(is_protocol_header(protocol_header));
  CHECK_FALSE(is_protocol_header(octets(std::string("AMQP\0\0\x09\x00", 8))));
  CHECK_FALSE(is_protocol_header(octets(std::string("AMQP\x01\x01\x00\x09", 8))));  // 0-9 legacy
  CHECK_FALSE(is_protocol_header(octets("GET / HT")));
  CHECK_FALSE(is_protocol_header(octets(std::string("AMQP\0\0\x09", 7))));
}

TEST_CASE("a heartbeat is eight octets on channel zero") {
  std::string hb;
  encode_heartbeat(hb);
  CHECK(hb == std::string("\x08\0\0\0\0\0\0\xCE", 8));
  const auto f = test::only_frame(hb);
  CHECK(f.type == frame_type::heartbeat);
  CHECK(f.channel == 0);
  CHECK(f.payload.empty());
}

TEST_CASE("frames are parsed one at a time off the front of a buffer") {
  std::string buf;
  encode_method(buf, 7, basic_ack{42, true});
  encode_heartbeat(buf);
  auto first = parse_frame(octets(buf), 4096);
  REQUIRE(first.state == parse_result::status::complete);
  CHECK(first.frame.channel == 7);
  CHECK(first.consumed == frame_overhead + 4 + 8 + 1);
  auto second = parse_frame(octets(buf).subspan(first.consumed), 4096);
  REQUIRE(second.state == parse_result::status::complete);
  CHECK(second.frame.type == frame_type::heartbeat);
  CHECK(first.consumed + second.consumed == buf.size());
}

TEST_CASE("frame-max bounds the whole frame, header and end octet included") {
  std::string buf;
  encode_body(buf, 1, std::string(4096 - frame_overhead, 'b'), 4096);
  CHECK(buf.size() == 4096);
  CHECK(parse_frame(octets(buf), 4096).state == parse_result::status::complete);
  CHECK(parse_frame(octets(buf), 4095).state == parse_result::status::malformed);
  CHECK(parse_frame(octets(buf), 0).state == parse_result::status::complete);  // 0: the spec minimum
}

TEST_CASE("a content header round-trips and keeps its property octets verbatim") {
  basic_properties p;
  p.content_type = "text/plain";
  p.delivery_mode = 2;
  const std::string props = encode_properties(p);
  std::string buf;
  encode_content_header(buf, 5, basic_publish::key.class_id, 123456789012ull, props);
  const auto f = test::only_frame(buf);
  CHECK(f.type == frame_type::header);
  CHECK(f.channel == 5);
  auto h = decode_content_header(f.payload);
  REQUIRE(h.ok());
  CHECK(h->class_id == basic_publish::key.class_id);
  CHECK(h->body_size == 123456789012ull);
  CHECK(test::str(h->property_octets) == props);
  auto back = decode_properties(h->property_octets);
  REQUIRE(back.ok());
  CHECK(*back == p);
}

TEST_CASE("a body is split into frames of at most frame-max - 8 octets") {
  std::string body(10000, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7);
  std::string buf;
  encode_body(buf, 2, body, 4096);
  std::string joined;
  std::vector<std::size_t> sizes;
  for (std::size_t at = 0; at < buf.size();) {
    auto p = parse_frame(octets(buf).subspan(at), 4096);
    REQUIRE(p.state == parse_result::status::complete);
    CHECK(p.frame.type == frame_type::body);
    CHECK(p.frame.channel == 2);
    sizes.push_back(p.frame.payload.size());
    joined += test::str(p.frame.payload);
    at += p.consumed;
  }
  CHECK(sizes == std::vector<std::size_t>{4088, 4088, 1824});
  CHECK(joined == body);

  std::string none;
  encode_body(none, 2, "", 4096);
  CHECK(none.empty());

  std::string exact;
  encode_body(exact, 2, std::string(2 * 4088, 'e'), 4096);
  CHECK(exact.size() == 2 * 4096);

  std::string unlimited;
  encode_body(unlimited, 2, body, 0);  // tune's 0: no limit, one frame
  CHECK(unlimited.size() == body.size() + frame_overhead);
}

TEST_CASE("reply codes carry their names, class and text shape") {
  CHECK(reply_name(reply_code::not_found) == "NOT_FOUND");
  CHECK(reply_name(reply_code::precondition_failed) == "PRECONDITION_FAILED");
  CHECK(reply_name(reply_code::frame_error) == "FRAME_ERROR");
  CHECK(reply_name(static_cast<reply_code>(999)) == "UNKNOWN_REPLY_CODE");
  CHECK(is_hard_error(reply_code::frame_error));
  CHECK(is_hard_error(reply_code::not_implemented));
  CHECK_FALSE(is_hard_error(reply_code::not_found));
  CHECK_FALSE(is_hard_error(reply_code::no_route));
  CHECK(static_cast<int>(reply_code::syntax_error) == 502);
  CHECK(reply_text(reply_code::not_found, "no queue 'q'") == "NOT_FOUND - no queue 'q'");
}

}  // namespace
}  // namespace amqp::wire
