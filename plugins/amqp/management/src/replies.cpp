#include "replies.hpp"

namespace amqp::management {

using json = nlohmann::json;

reply error_reply(unsigned status, const std::string& error, const std::string& reason) {
  return json_reply(status, json{{"error", error}, {"reason", reason}});
}

// Text that is not UTF-8 (a percent-decoded query, a message's property) is written with U+FFFD in
// its place, where dump() would throw and turn the reply, a 400 naming the field, into a 500.
reply json_reply(unsigned status, const json& body) {
  return reply{status, body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json", {}, {}};
}
reply no_content() { return reply{204, "", "application/json", {}, {}}; }
reply created() { return reply{201, "", "application/json", {}, {}}; }
reply not_found() { return error_reply(404, "Object Not Found", "Not Found"); }
reply bad_request(const std::string& reason) { return error_reply(400, "bad_request", reason); }
reply refused_vhost() { return error_reply(401, "not_authorised", "User not authorised to access virtual host"); }

reply refused_reply(const std::optional<wire::refusal>& refused, bool timed_out, const std::string& what) {
  if (timed_out) return error_reply(504, "timeout", what + ": the broker did not answer in time");
  if (!refused) return error_reply(500, "internal_error", what + ": no answer");
  if (refused->code == wire::reply_code::not_found) return error_reply(404, "not_found", refused->text);
  if (refused->code == wire::reply_code::access_refused) return error_reply(403, "access_refused", refused->text);
  return bad_request(refused->text);
}

}  // namespace amqp::management
