#include "publish/publish_permission.hpp"

#include "channel/bus_failure.hpp"
#include "channel/channel_context.hpp"

namespace amqp::broker {

bool publish_denied(channel_context& chan, const std::string& subject) {
  const auto permitted = chan.bus().may_publish(subject);
  if (permitted) return false;
  // The words publish_done gives the server's refusal of a stored publish.
  chan.refuse(bus_failure_reply(permitted.error().kind, "the bus did not store the message published to " + subject,
                                permitted.error().text, {}),
              wire::basic_publish::key);
  return true;
}

}  // namespace amqp::broker
