#pragma once
// One channel's publish in progress: basic.publish, then a content header, then body frames
// until the declared size (spec §4.2.6). Pure state, no I/O, so every rule is unit-tested.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "amqp/wire/methods.hpp"
#include "amqp/wire/reply_code.hpp"

namespace amqp::server {

struct assembled_publish {
  wire::basic_publish method;
  std::string property_octets;
  std::string body;
};

class content_assembly {
 public:
  enum class expecting { nothing, header, body };
  // What a header or body frame did.
  enum class outcome {
    incomplete,  // more body frames are due
    complete,    // take() the publish
    too_large,   // header declared more than the limit: a 311 channel exception
    overrun,     // body frames carry more than the header declared: 501
  };

  expecting state() const noexcept { return state_; }
  bool active() const noexcept { return state_ != expecting::nothing; }

  void begin(wire::basic_publish method);
  // The header's declared size is judged before anything is buffered.
  outcome on_header(std::uint64_t body_size, std::span<const std::uint8_t> property_octets,
                    std::uint64_t max_body_size);
  outcome on_body(std::span<const std::uint8_t> octets);
  // The finished publish; the assembly is idle again afterwards.
  assembled_publish take();
  void reset();

  std::uint64_t declared_size() const noexcept { return body_size_; }
  // Room the body's buffer holds: what a declaration has made the server allocate.
  std::size_t reserved() const noexcept { return current_.body.capacity(); }

 private:
  expecting state_ = expecting::nothing;
  std::uint64_t body_size_ = 0;
  assembled_publish current_;
};

}  // namespace amqp::server
