#include <doctest/doctest.h>

#include "amqp/bus/base64.hpp"
#include "client_impl.hpp"

using namespace amqp::bus;

TEST_CASE("base64 round-trips every length and rejects what is not base64") {
  std::string octets;
  for (int i = 0; i < 300; ++i) {
    CHECK(base64_decode(base64_encode(octets)) == octets);
    octets.push_back(static_cast<char>(i * 37));
  }
  CHECK(base64_encode("ab") == "YWI=");
  CHECK(base64_decode("YWI=") == std::string{"ab"});
  CHECK_FALSE(base64_decode("YWI").has_value());       // not a multiple of 4
  CHECK_FALSE(base64_decode("Y*I=").has_value());      // bad character
  CHECK_FALSE(base64_decode("YW=I").has_value());      // padding inside
  CHECK(base64_decode("") == std::string{});
}

TEST_CASE("ack subjects: v1 and v2 (domain, account hash, trailing token) forms") {
  delivery d;
  REQUIRE(detail::parse_ack_subject("$JS.ACK.AMQP.q1.2.17.5.1700000000000000000.3", d));
  CHECK(d.delivered == 2);
  CHECK(d.stream_seq == 17);
  CHECK(d.pending == 3);
  CHECK(d.stored_ns == 1700000000000000000);
  delivery v2;
  REQUIRE(detail::parse_ack_subject("$JS.ACK._.ACCHASH.AMQP.q1.1.42.9.1700000000000000000.0.XyZ", v2));
  CHECK(v2.delivered == 1);
  CHECK(v2.stream_seq == 42);
  CHECK(v2.pending == 0);
  delivery bad;
  CHECK_FALSE(detail::parse_ack_subject("$JS.ACK.AMQP.q1.x.17.5.1.3", bad));
  CHECK_FALSE(detail::parse_ack_subject("_INBOX.abc", bad));
  CHECK_FALSE(detail::parse_ack_subject("$JS.ACK.AMQP.q1.1.2.3.4.5.6", bad));  // 10 tokens: neither form
}
