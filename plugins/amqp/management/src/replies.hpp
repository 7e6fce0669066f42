#pragma once
// A request as the API reads it and the replies it gives, in RabbitMQ's JSON shapes. Pure: no I/O.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "amqp/wire/reply_code.hpp"
#include "query.hpp"

namespace amqp::management {

struct request {
  std::string method;  // GET, PUT, POST, DELETE, HEAD
  std::vector<std::string> path;  // the segments after /api/, percent-decoded
  management::query query;
  std::string body;
};

struct reply {
  unsigned status = 200;
  std::string body;  // JSON, or "" (204)
  std::string content_type = "application/json";
  std::string allow;     // with 405: the methods the path takes
  std::string location;  // with 201 for a binding
};

// A reply in RabbitMQ's error shape: {"error": error, "reason": reason}.
reply error_reply(unsigned status, const std::string& error, const std::string& reason);
reply json_reply(unsigned status, const nlohmann::json& body);
reply no_content();
reply created();
reply not_found();
reply bad_request(const std::string& reason);
// A vhost the user may not use, in RabbitMQ's words.
reply refused_vhost();
// What a refusal over AMQP is over HTTP, as RabbitMQ's management plugin maps it (404, 403, else
// 400 with the reply text); a method the broker did not answer in time is 504.
reply refused_reply(const std::optional<wire::refusal>& refused, bool timed_out, const std::string& what);

}  // namespace amqp::management
