#include <doctest/doctest.h>

#include <vector>

#include "content_assembly.hpp"

using namespace amqp;
using namespace amqp::server;
using outcome = content_assembly::outcome;
using expecting = content_assembly::expecting;

namespace {

// From a literal, embedded zero octets included.
template <std::size_t N>
std::vector<std::uint8_t> octets(const char (&literal)[N]) {
  return {literal, literal + N - 1};
}

wire::basic_publish publish_to(std::string key) {
  wire::basic_publish p;
  p.exchange = std::string(1, 'x');  // not = "x": g++ 12 -O2 raises a false -Wrestrict there
  p.routing_key = std::move(key);
  return p;
}

}  // namespace

TEST_CASE("idle until basic.publish, then a header, then bodies up to the declared size") {
  content_assembly a;
  CHECK_FALSE(a.active());
  a.begin(publish_to("k"));
  CHECK(a.state() == expecting::header);
  const auto props = octets("\x80\x00\x0atext/plain");
  CHECK(a.on_header(10, props, 100) == outcome::incomplete);
  CHECK(a.state() == expecting::body);
  CHECK(a.on_body(octets("hello")) == outcome::incomplete);
  CHECK(a.on_body(octets("world")) == outcome::complete);
  CHECK_FALSE(a.active());
  auto done = a.take();
  CHECK(done.method.routing_key == "k");
  CHECK(done.property_octets == std::string(props.begin(), props.end()));
  CHECK(done.body == "helloworld");
}

TEST_CASE("a zero-size body is complete on the header") {
  content_assembly a;
  a.begin(publish_to("k"));
  CHECK(a.on_header(0, octets("\x00\x00"), 100) == outcome::complete);
  auto done = a.take();
  CHECK(done.body.empty());
  CHECK(done.property_octets == std::string("\x00\x00", 2));
}

TEST_CASE("a declared size over the limit is refused on the header, nothing buffered") {
  content_assembly a;
  a.begin(publish_to("k"));
  CHECK(a.on_header(101, octets("\x00\x00"), 100) == outcome::too_large);
  CHECK(a.declared_size() == 101);
  CHECK_FALSE(a.active());
  a.begin(publish_to("k"));
  CHECK(a.on_header(100, octets("\x00\x00"), 100) == outcome::incomplete);  // at the limit is fine
}

TEST_CASE("a 4 GiB declaration does not allocate") {
  content_assembly a;
  a.begin(publish_to("k"));
  // Limit above the declaration: the body grows only as octets arrive.
  CHECK(a.on_header(std::uint64_t{4} << 30, octets("\x00\x00"), std::uint64_t{8} << 30) == outcome::incomplete);
  CHECK(a.reserved() <= 64 * 1024);
  CHECK(a.on_body(octets("abc")) == outcome::incomplete);
  CHECK(a.reserved() <= 64 * 1024);
}

TEST_CASE("a large body's buffer grows with what arrived, at most four times it, and moves at most twice") {
  content_assembly a;
  a.begin(publish_to("k"));
  constexpr std::size_t body_size = 1 << 20;
  constexpr std::size_t frame = 131072 - 8;  // a body frame at the default frame_max
  CHECK(a.on_header(body_size, octets("\x00\x00"), std::uint64_t{8} << 20) == outcome::incomplete);
  const std::vector<std::uint8_t> chunk(frame, 'x');
  std::size_t sent = 0;
  std::size_t growths = 0;
  std::size_t room = a.reserved();
  while (body_size - sent > frame) {
    CHECK(a.on_body(chunk) == outcome::incomplete);
    sent += frame;
    CHECK(a.reserved() <= 4 * sent);
    if (a.reserved() != room) ++growths;
    room = a.reserved();
  }
  const std::vector<std::uint8_t> last(body_size - sent, 'y');
  CHECK(a.on_body(last) == outcome::complete);
  if (a.reserved() != room) ++growths;
  CHECK(growths <= 2);  // the first growth has nothing to move yet
  CHECK(a.take().body.size() == body_size);
}

TEST_CASE("body frames beyond the declared size are an overrun") {
  content_assembly a;
  a.begin(publish_to("k"));
  CHECK(a.on_header(4, octets("\x00\x00"), 100) == outcome::incomplete);
  CHECK(a.on_body(octets("abcde")) == outcome::overrun);
  CHECK_FALSE(a.active());
}

TEST_CASE("reset abandons a publish in progress") {
  content_assembly a;
  a.begin(publish_to("k"));
  CHECK(a.on_header(4, octets("\x00\x00"), 100) == outcome::incomplete);
  a.reset();
  CHECK_FALSE(a.active());
  a.begin(publish_to("k2"));
  CHECK(a.on_header(1, octets("\x00\x00"), 100) == outcome::incomplete);
  CHECK(a.on_body(octets("z")) == outcome::complete);
  CHECK(a.take().method.routing_key == "k2");
}
