#pragma once
// What a JetStream API request answers, as the bus's parts read it.
#include <nats/nats.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "amqp/bus/result.hpp"

namespace amqp::bus::detail {

// The sentence for a request nobody answers: the server has no JetStream.
extern const char* const no_jetstream_text;

// A JetStream API reply: either the parsed JSON or the API's own error.
bus_result<nlohmann::json> parse_api_reply(std::string_view step, natsMsg* reply);

}  // namespace amqp::bus::detail
