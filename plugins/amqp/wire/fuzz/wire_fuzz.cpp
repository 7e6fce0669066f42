// libFuzzer target over the wire decoders: the input is read as a stream of frames (each
// decoded by its type), and also directly as a method payload, a property list and a field
// table. Whatever decodes must re-encode to octets that decode and re-encode identically.
// Built and run by scripts/fuzz (clang, -fsanitize=fuzzer,address,undefined).
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "amqp/wire/codec.hpp"

namespace {

using amqp::wire::field_table;
using octets = std::span<const std::uint8_t>;

octets view(const std::string& s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

void require(bool ok) {
  if (!ok) std::abort();  // a finding: re-encoding is not stable
}

// The payload of the single frame that `encoded` must hold.
octets payload_of(const std::string& encoded) {
  const auto p = amqp::wire::parse_frame(view(encoded), 0xFFFFFFFFu);
  require(p.state == amqp::wire::parse_result::status::complete && p.consumed == encoded.size());
  return p.frame.payload;
}

void check_method(octets payload) {
  auto m = amqp::wire::decode_method(payload);
  if (!m) return;
  std::string once;
  amqp::wire::encode_method(once, 1, *m);
  auto again = amqp::wire::decode_method(payload_of(once));
  require(again.ok());
  std::string twice;
  amqp::wire::encode_method(twice, 1, *again);
  require(once == twice);
  (void)amqp::wire::info_of(*m).name;
}

void check_properties(octets raw) {
  auto p = amqp::wire::decode_properties(raw);
  if (!p) return;
  const std::string once = amqp::wire::encode_properties(*p);
  auto again = amqp::wire::decode_properties(view(once));
  require(again.ok());
  require(amqp::wire::encode_properties(*again) == once);
}

void check_table(octets raw) {
  auto t = amqp::wire::decode_table(raw);
  if (!t) return;
  std::string once;
  amqp::wire::encode_table(once, *t);
  auto again = amqp::wire::decode_table(view(once));
  require(again.ok());
  std::string twice;
  amqp::wire::encode_table(twice, *again);
  require(once == twice);
}

void check_frame(const amqp::wire::frame_view& f) {
  switch (f.type) {
    case amqp::wire::frame_type::method: check_method(f.payload); break;
    case amqp::wire::frame_type::header: {
      auto h = amqp::wire::decode_content_header(f.payload);
      if (!h) break;
      check_properties(h->property_octets);
      std::string out;
      amqp::wire::encode_content_header(out, f.channel, h->class_id, h->body_size,
                                        {reinterpret_cast<const char*>(h->property_octets.data()),
                                         h->property_octets.size()});
      auto back = amqp::wire::decode_content_header(payload_of(out));
      require(back.ok() && back->body_size == h->body_size && back->class_id == h->class_id);
      break;
    }
    case amqp::wire::frame_type::body: {
      std::string out;
      const std::string body(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
      amqp::wire::encode_body(out, f.channel, body, 4096);
      require(out.size() >= body.size());
      break;
    }
    case amqp::wire::frame_type::heartbeat: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const octets input(data, size);
  octets rest = input;
  for (;;) {
    const auto p = amqp::wire::parse_frame(rest, 131072);
    if (p.state != amqp::wire::parse_result::status::complete) break;
    check_frame(p.frame);
    rest = rest.subspan(p.consumed);
  }
  (void)amqp::wire::is_protocol_header(input.first(std::min<std::size_t>(8, size)));
  check_method(input);
  check_properties(input);
  check_table(input);
  return 0;
}
