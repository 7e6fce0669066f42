#pragma once
// A publish is stored under the subjects of the queues it reaches, never under its exchange's
// (`amqp.<exchange>.<key>`), so the server no longer judges that subject against the user's
// publish permissions: the bus client judges it by them (bus::client::may_publish), and a
// refusal is answered as the server's own refusal was (403, naming the user and the subject).
#include <string>

namespace amqp::broker {

class channel_context;

// True once the channel is refused because its user may not publish to `subject`.
bool publish_denied(channel_context& chan, const std::string& subject);

}  // namespace amqp::broker
