#pragma once
// Decodes what the broker hands connection_port::send into methods with their content, the
// way a client reads its socket. Shared by the channel tests' fake connection and the sequence
// fuzzer, which both must notice a frame the wire codec cannot read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "amqp/wire/codec.hpp"

namespace amqp::broker::test {

// One method the client received, with its content when it carries one.
struct received {
  std::uint16_t channel = 0;
  wire::method method;
  std::optional<wire::basic_properties> properties;
  std::string body;
};

// Appends every method of `octets` (one send: whole frames, a content method's header and
// bodies complete) to `out`. Returns what is wrong with them, or nothing.
std::optional<std::string> decode_frames(const std::string& octets, std::uint32_t frame_max,
                                         std::vector<received>& out);

}  // namespace amqp::broker::test
