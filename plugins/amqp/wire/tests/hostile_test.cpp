// Hostile input: every truncation, hostile sizes and lengths, deep nesting, unknown codes.
// Each must give the right reply code, never crash, and never allocate what it claims.
#include <atomic>
#include <cstdlib>
#include <new>

#include "support.hpp"

// Records the largest single allocation, so a test can show a claimed size was never allocated.
namespace {
std::atomic<std::size_t> largest_allocation{0};
void* allocate(std::size_t n) {
  std::size_t seen = largest_allocation.load();
  while (n > seen && !largest_allocation.compare_exchange_weak(seen, n)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace amqp::wire {
namespace {

using test::octets;

constexpr std::size_t small_allocation = 64 * 1024;

template <class Fn>
std::size_t largest_allocation_during(Fn&& fn) {
  largest_allocation = 0;
  fn();
  return largest_allocation.load();
}

std::string be16(std::uint16_t v) {
  std::string s;
  detail::put_u16(s, v);
  return s;
}
std::string be32(std::uint32_t v) {
  std::string s;
  detail::put_u32(s, v);
  return s;
}
std::string ids(method_key k) { return be16(k.class_id) + be16(k.method_id); }

void check_error(const refusal& e, reply_code code, std::string_view words) {
  CAPTURE(e.text);
  CHECK(e.code == code);
  CHECK(e.text.find(words) != std::string::npos);
}

std::string sample_stream() {
  queue_declare q;
  q.queue = "orders";
  q.durable = true;
  q.arguments = test::every_type_table();
  basic_properties p;
  p.content_type = "text/plain";
  p.headers = test::every_type_table();
  p.priority = 0;
  std::string out;
  encode_method(out, 1, q);
  encode_content_header(out, 1, basic_publish::key.class_id, 5000, encode_properties(p));
  encode_body(out, 1, std::string(5000, 'z'), 4096);
  encode_heartbeat(out);
  return out;
}

TEST_CASE("a frame cut at any length needs more bytes and is never malformed") {
  const std::string stream = sample_stream();
  std::size_t at = 0, frames = 0;
  while (at < stream.size()) {
    const auto rest = octets(stream).subspan(at);
    const auto whole = parse_frame(rest, 4096);
    REQUIRE(whole.state == parse_result::status::complete);
    for (std::size_t n = 0; n < whole.consumed; ++n) {
      const auto cut = parse_frame(rest.first(n), 4096);
      CAPTURE(n);
      REQUIRE(cut.state == parse_result::status::need_more);
    }
    at += whole.consumed;
    ++frames;
  }
  CHECK(frames == 5);  // method, header, two bodies, heartbeat
}

TEST_CASE("a method cut at any length is a syntax error naming the method") {
  connection_start s;
  s.version_major = 0;
  s.version_minor = 9;
  s.server_properties = test::every_type_table();
  s.mechanisms = "PLAIN";
  s.locales = "en_US";
  std::string bytes;
  encode_method(bytes, 0, s);
  const auto payload = test::only_frame(bytes).payload;
  for (std::size_t n = 0; n < payload.size(); ++n) {
    auto got = decode_method(payload.first(n));
    CAPTURE(n);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == reply_code::syntax_error);
    if (n >= 4) CHECK(got.error().text.find("connection.start: argument '") == 0);
  }
  CHECK(decode_method(payload).ok());
}

TEST_CASE("properties and tables cut at any length are syntax errors") {
  basic_properties p;
  p.headers = test::every_type_table();
  p.app_id = "app";
  const std::string props = encode_properties(p);
  for (std::size_t n = 0; n < props.size(); ++n) {
    auto got = decode_properties(octets(props).first(n));
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == reply_code::syntax_error);
  }
  std::string table;
  encode_table(table, test::every_type_table());
  for (std::size_t n = 0; n < table.size(); ++n) {
    auto got = decode_table(octets(table).first(n));
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == reply_code::syntax_error);
  }
}

TEST_CASE("a 4 GiB frame size is refused from the header alone") {
  const std::string header = std::string("\x03\0\x01", 3) + be32(0xFFFFFFFF);
  parse_result got;
  const auto largest = largest_allocation_during([&] { got = parse_frame(octets(header), 131072); });
  REQUIRE(got.state == parse_result::status::malformed);
  check_error(got.error, reply_code::frame_error, "exceeds the negotiated frame-max of 131072");
  CHECK(largest < small_allocation);
  // Before tune, the spec's minimum applies.
  const std::string big = std::string("\x01\0\x01", 3) + be32(5000);
  CHECK(parse_frame(octets(big), 0).state == parse_result::status::malformed);
}

TEST_CASE("a wrong end octet, an unknown frame type and a bad heartbeat are frame errors") {
  std::string bytes;
  encode_method(bytes, 1, basic_qos{});
  bytes.back() = '\xCD';
  auto end = parse_frame(octets(bytes), 4096);
  REQUIRE(end.state == parse_result::status::malformed);
  check_error(end.error, reply_code::frame_error, "end octet");

  const std::string type4 = std::string("\x04\0\0", 3) + be32(0) + "\xCE";
  auto type = parse_frame(octets(type4), 4096);
  REQUIRE(type.state == parse_result::status::malformed);
  check_error(type.error, reply_code::frame_error, "unknown frame type 4");

  const std::string hb = std::string("\x08\0\x01", 3) + be32(0) + "\xCE";
  auto beat = parse_frame(octets(hb), 4096);
  REQUIRE(beat.state == parse_result::status::malformed);
  check_error(beat.error, reply_code::frame_error, "heartbeat");
}

TEST_CASE("an oversized long string is refused without allocating its claimed size") {
  // connection.start-ok whose response claims almost 4 GiB inside a small frame.
  const std::string payload = ids(connection_start_ok::key) + be32(0) + "\x05PLAIN" + be32(0xFFFFFFF0) + "abc";
  result<method> got = refusal{};
  const auto largest = largest_allocation_during([&] { got = decode_method(octets(payload)); });
  REQUIRE_FALSE(got.ok());
  check_error(got.error(), reply_code::syntax_error, "argument 'response'");
  check_error(got.error(), reply_code::syntax_error, "4294967280 octets overruns");
  CHECK(largest < small_allocation);

  for (char code : {'S', 'x'}) {
    const std::string entry = std::string("\x01k") + code + be32(0x7FFFFFFF) + "ab";
    const std::string table = be32(static_cast<std::uint32_t>(entry.size())) + entry;
    result<field_table> t = field_table{};
    const auto most = largest_allocation_during([&] { t = decode_table(octets(table)); });
    REQUIRE_FALSE(t.ok());
    check_error(t.error(), reply_code::syntax_error, "overruns");
    CHECK(most < small_allocation);
  }

  const std::string huge_table = be32(0xFFFFFFFF) + "\x01k";
  auto t = decode_table(octets(huge_table));
  REQUIRE_FALSE(t.ok());
  check_error(t.error(), reply_code::syntax_error, "field table of 4294967295 octets in 'table' overruns");
}

std::string nested_arrays(std::size_t levels) {
  // Built outside in: level k's length covers the levels below it.
  std::string value;
  value.reserve(levels * 5);
  for (std::size_t k = 0; k < levels; ++k) value += "A" + be32(static_cast<std::uint32_t>(5 * (levels - 1 - k)));
  const std::string entry = "\x01k" + value;
  return be32(static_cast<std::uint32_t>(entry.size())) + entry;
}

TEST_CASE("nesting past the depth limit is refused, however deep") {
  CHECK(decode_table(octets(nested_arrays(max_table_depth))).ok());
  for (std::size_t levels : {std::size_t(max_table_depth) + 1, std::size_t{26000}, std::size_t{200000}}) {
    auto got = decode_table(octets(nested_arrays(levels)));
    CAPTURE(levels);
    REQUIRE_FALSE(got.ok());
    check_error(got.error(), reply_code::syntax_error, "nested deeper than 64 levels");
  }
}

TEST_CASE("an unknown field type code is a syntax error, not skipped") {
  for (char code : {'Z', 'U', '\0', '\xFF'}) {
    const std::string entry = std::string("\x01k") + code + "\0\0\0\0";
    auto got = decode_table(octets(be32(static_cast<std::uint32_t>(entry.size())) + entry));
    REQUIRE_FALSE(got.ok());
    check_error(got.error(), reply_code::syntax_error, "unknown type code");
  }
  const std::string z = std::string("\x01kZ", 3);
  auto named = decode_table(octets(be32(3) + z));
  REQUIRE_FALSE(named.ok());
  check_error(named.error(), reply_code::syntax_error, "field 'k' has unknown type code 'Z' (0x5a)");
}

TEST_CASE("a bit field that overruns the frame is truncation, naming the bit") {
  const std::string ack = ids(basic_ack::key) + std::string(8, '\x01');  // no octet for `multiple`
  auto got = decode_method(octets(ack));
  REQUIRE_FALSE(got.ok());
  check_error(got.error(), reply_code::syntax_error, "basic.ack: argument 'multiple' is truncated");

  const std::string flow = ids(channel_flow::key);
  auto f = decode_method(octets(flow));
  REQUIRE_FALSE(f.ok());
  check_error(f.error(), reply_code::syntax_error, "channel.flow: argument 'active' is truncated");
}

TEST_CASE("unknown methods, short payloads and trailing octets are refused") {
  auto unknown = decode_method(octets(be16(basic_ack::key.class_id) + be16(999)));
  REQUIRE_FALSE(unknown.ok());
  check_error(unknown.error(), reply_code::command_invalid, "method 999");

  auto no_class = decode_method(octets(std::string(4, '\0')));
  REQUIRE_FALSE(no_class.ok());
  CHECK(no_class.error().code == reply_code::command_invalid);

  auto shorty = decode_method(octets(std::string("\0\x3c", 2)));
  REQUIRE_FALSE(shorty.ok());
  check_error(shorty.error(), reply_code::syntax_error, "too short");

  std::string ok;
  encode_method(ok, 1, basic_ack{1, false});
  std::string payload = test::str(test::only_frame(ok).payload) + "xx";
  auto trailing = decode_method(octets(payload));
  REQUIRE_FALSE(trailing.ok());
  check_error(trailing.error(), reply_code::syntax_error, "basic.ack: 2 octets follow the last argument");

  auto header = decode_content_header(octets(std::string(11, '\0')));
  REQUIRE_FALSE(header.ok());
  check_error(header.error(), reply_code::syntax_error, "content header of 11 octets");

  auto extra = decode_properties(octets(std::string("\0\0z", 3)));
  REQUIRE_FALSE(extra.ok());
  check_error(extra.error(), reply_code::syntax_error, "1 octets after the properties");
}

}  // namespace
}  // namespace amqp::wire
