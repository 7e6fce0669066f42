// Decode and encode throughput of the wire codec for publish-sized messages: a publish (or a
// delivery) is a method frame, a content header frame and one body frame.
//   usage: wire_bench [seconds per case]   (default 1)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "amqp/wire/codec.hpp"

namespace {

using namespace amqp::wire;
using clock_type = std::chrono::steady_clock;

std::span<const std::uint8_t> view(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

basic_properties sample_properties() {
  basic_properties p;
  p.content_type = "application/json";
  p.delivery_mode = 2;
  p.message_id = "msg-0000000001";
  p.timestamp = 1700000000;
  field_table h;
  h.entries.push_back({"x-trace", field_value{std::string("abc123")}});
  h.entries.push_back({"x-retries", field_value{std::int32_t{0}}});
  p.headers = std::move(h);
  return p;
}

std::string publish_frames(std::size_t body_size) {
  std::string out;
  encode_method(out, 1, basic_publish{0, "orders", "order.created.eu", false, false});
  encode_content_header(out, 1, basic_publish::key.class_id, body_size, encode_properties(sample_properties()));
  encode_body(out, 1, std::string(body_size, 'b'), 131072);
  return out;
}

void report(const char* what, std::size_t body, std::uint64_t frames, std::uint64_t octets, double secs) {
  std::printf("%-7s body %6zu B: %10.0f frames/s %9.1f MB/s\n", what, body, static_cast<double>(frames) / secs,
              static_cast<double>(octets) / secs / 1e6);
}

// Parses and decodes every frame of a publish, as the session and broker would.
void bench_decode(std::size_t body, double seconds) {
  const std::string stream = publish_frames(body);
  std::uint64_t frames = 0, octets = 0, checksum = 0;
  const auto start = clock_type::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 256; ++i) {
      auto in = view(stream);
      while (!in.empty()) {
        const auto p = parse_frame(in, 131072);
        if (p.state != parse_result::status::complete) std::abort();
        if (p.frame.type == frame_type::method) {
          auto m = decode_method(p.frame.payload);
          checksum += m.ok() ? std::get<basic_publish>(*m).routing_key.size() : 0;
        } else if (p.frame.type == frame_type::header) {
          auto h = decode_content_header(p.frame.payload);
          auto props = decode_properties(h->property_octets);
          checksum += props.ok() ? h->body_size : 0;
        } else {
          checksum += p.frame.payload.size();
        }
        in = in.subspan(p.consumed);
        ++frames;
      }
      octets += stream.size();
    }
    elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  }
  if (checksum == 0) std::abort();
  report("decode", body, frames, octets, elapsed);
}

// Builds the delivery of a publish: method, header (properties verbatim) and body.
void bench_encode(std::size_t body_size, double seconds) {
  const std::string body(body_size, 'b');
  const std::string props = encode_properties(sample_properties());
  std::uint64_t frames = 0, octets = 0;
  std::string out;
  const auto start = clock_type::now();
  double elapsed = 0;
  std::uint64_t tag = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 256; ++i) {
      out.clear();
      encode_method(out, 1, basic_deliver{"ctag-1", ++tag, false, "orders", "order.created.eu"});
      encode_content_header(out, 1, basic_deliver::key.class_id, body.size(), props);
      encode_body(out, 1, body, 131072);
      frames += 3;
      octets += out.size();
    }
    elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  }
  report("encode", body_size, frames, octets, elapsed);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  for (std::size_t body : {std::size_t{100}, std::size_t{1024}, std::size_t{16384}}) {
    bench_decode(body, seconds);
    bench_encode(body, seconds);
  }
  return 0;
}
