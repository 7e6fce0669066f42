#include "frame_decoder.hpp"

#include <span>

namespace amqp::broker::test {
namespace {

std::span<const std::uint8_t> octets_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

std::optional<std::string> decode_frames(const std::string& octets, std::uint32_t frame_max,
                                         std::vector<received>& out) {
  std::optional<std::uint64_t> body_left;  // of the content being read: octets still to come
  for (std::size_t at = 0; at < octets.size();) {
    auto parsed = wire::parse_frame(octets_of(octets).subspan(at), frame_max);
    if (parsed.state != wire::parse_result::status::complete) return "the broker sent a broken frame";
    at += parsed.consumed;
    const auto& f = parsed.frame;
    switch (f.type) {
      case wire::frame_type::method: {
        if (body_left && *body_left > 0) return "a method frame before the previous content's body was complete";
        auto m = wire::decode_method(f.payload);
        if (!m.ok()) return "the broker sent a method that does not decode";
        out.push_back({f.channel, std::move(*m), std::nullopt, {}});
        body_left.reset();
        break;
      }
      case wire::frame_type::header: {
        if (out.empty() || out.back().channel != f.channel) return "a content header without its method";
        auto h = wire::decode_content_header(f.payload);
        if (!h.ok()) return "the broker sent a content header that does not decode";
        auto props = wire::decode_properties(h->property_octets);
        if (!props.ok()) return "the broker sent properties that do not decode";
        out.back().properties = std::move(*props);
        body_left = h->body_size;
        break;
      }
      case wire::frame_type::body:
        if (out.empty() || !body_left || f.payload.size() > *body_left) return "a body frame beyond its header's size";
        out.back().body.append(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
        *body_left -= f.payload.size();
        break;
      case wire::frame_type::heartbeat: break;
    }
  }
  if (body_left && *body_left > 0) return "a content body cut short within one send";
  return std::nullopt;
}

}  // namespace amqp::broker::test
