// A signed-in client's publish permissions, read from the server (publish_permissions.hpp).
#include <boost/asio/post.hpp>
#include <algorithm>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

// The server never answers a request it refused, and says so in an -ERR of its own
// (on_async_error): the wait is cut into growing slices, each a fresh request, so that a refusal
// ends it at once instead of after the whole request timeout.
bus_result<std::string> client_impl::user_info() {
  const std::string step = std::string{"ask "} + user_info_subject;
  if (closed_) return failure(step, "bus client is closed");
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + options_.request_timeout;
  for (std::chrono::milliseconds slice{50};; slice *= 2) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const auto wait = std::max<std::int64_t>(1, std::min(slice, left).count());
    natsMsg* raw = nullptr;
    const natsStatus s = natsConnection_Request(&raw, control_.get(), user_info_subject, "", 0, static_cast<int>(wait));
    msg_ptr reply{raw};
    if (s == NATS_OK) return std::string{natsMsg_GetData(reply.get()), static_cast<std::size_t>(natsMsg_GetDataLength(reply.get()))};
    if (denied_since(user_info_subject, started)) return denied(step, user_info_subject);
    if (s != NATS_TIMEOUT || left <= slice || closed_) return nats_failure(step, s);
  }
}

void client_impl::read_permissions() {
  auto answer = user_info();
  if (!answer) return permissions_.not_told(answer.error().text, answer.error().kind == bus_errc::denied);
  auto permission = publish_permission_of(*answer);
  if (!permission) return permissions_.not_told(std::string{"ask "} + user_info_subject + ": " + permission.error(), true);
  permissions_.learn(std::move(*permission));
}

void client_impl::reread_permissions() {
  if (!judges_publishes_ || closed_ || rereading_permissions_.exchange(true)) return;
  boost::asio::post(workers_->get_executor(), [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    auto* c = static_cast<client_impl*>(self.get());
    c->read_permissions();
    c->rereading_permissions_ = false;
  });
}

bus_status client_impl::may_publish(std::string_view subject) {
  if (!judges_publishes_) return bus_ok();  // the adaptor's own user: the operator's, for all its work
  if (permissions_.stale()) reread_permissions();  // this answer is the latest until it comes
  const auto judged = permissions_.judge(subject);
  const std::string step = "publish to " + std::string{subject};
  switch (judged.is) {
    case publish_permissions::verdict::allowed: return bus_ok();
    case publish_permissions::verdict::denied: return denied(step, std::string{subject});
    case publish_permissions::verdict::unknown: break;
  }
  return failure(step,
                 "the bus did not say what " + user_text() + " may publish, so its publishes are refused (" +
                     judged.why_unknown + "); grant it publish on " + user_info_subject,
                 bus_errc::denied);
}

}  // namespace amqp::bus::detail
