// The client's reply subscription `<inbox>.>` for publish acks (`<inbox>.a.<publish id>`),
// settlement of deliveries, and the parsing of `$JS.ACK` subjects. Its callback runs on a nats
// thread and only looks up the publish and posts its completion.
#include <boost/asio/post.hpp>
#include <charconv>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

bool to_u64(std::string_view s, std::uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

// A stored publish is acknowledged as `{"stream":"AMQP", "seq": N}`: recognised without a
// JSON parse, which cost a tenth of the adaptor's CPU per published message. Anything else
// (an error, an unexpected shape) takes the full parse.
bool plain_pub_ack(natsMsg* msg) {
  const char* data = natsMsg_GetData(msg);
  if (data == nullptr) return false;
  const std::string_view body(data, static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  return body.starts_with("{\"stream\":") && body.find("\"error\"") == std::string_view::npos;
}

}  // namespace

bool parse_ack_subject(std::string_view reply, delivery& out) {
  const auto t = tokens(reply);
  if (t.size() < 9 || t[0] != "$JS" || t[1] != "ACK") return false;
  // v1: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
  // v2: $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>]
  std::size_t base = 0;
  if (t.size() == 9)
    base = 4;
  else if (t.size() >= 11)
    base = 6;
  else
    return false;
  std::uint64_t cseq = 0;
  std::uint64_t ts = 0;
  return to_u64(t[base], out.delivered) && to_u64(t[base + 1], out.stream_seq) &&
         to_u64(t[base + 2], cseq) && to_u64(t[base + 3], ts) && to_u64(t[base + 4], out.pending);
}

// ---- settlement ---------------------------------------------------------------------------

void client_impl::settle(const std::string& reply, const char* verb) {
  if (closed_ || reply.rfind("$JS.ACK.", 0) != 0) return;
  natsConnection_PublishString(conn_.get(), reply.c_str(), verb);
}

void client_impl::ack(const std::string& reply) { settle(reply, "+ACK"); }
void client_impl::nak(const std::string& reply) { settle(reply, "-NAK"); }
void client_impl::term(const std::string& reply) { settle(reply, "+TERM"); }

// ---- the subscription ---------------------------------------------------------------------

bus_status client_impl::start_inbox() {
  const std::string step = "reply subscription";
  natsInbox* raw_inbox = nullptr;
  if (natsStatus s = natsInbox_Create(&raw_inbox); s != NATS_OK) return nats_failure(step, s);
  inbox_ptr inbox{raw_inbox};
  inbox_ = inbox.get();
  if (inbox_.size() > max_inbox_size)  // send_publish builds "<inbox>.a.<id>" in a fixed buffer
    return failure(step, "nats.c made an inbox of " + std::to_string(inbox_.size()) + " characters, more than " +
                             std::to_string(max_inbox_size));
  natsSubscription* sub = nullptr;
  natsStatus s = natsConnection_Subscribe(&sub, conn_.get(), (inbox_ + ".>").c_str(), &client_impl::on_inbox_msg, this);
  if (s != NATS_OK) return nats_failure(step, s);
  inbox_sub_.reset(sub);
  // Deliveries are bounded by the batches asked for; do not let the default limits drop them.
  s = natsSubscription_SetPendingLimits(sub, 1'000'000, 1024 * 1024 * 1024);
  if (s == NATS_OK) s = natsSubscription_SetOnCompleteCB(sub, &client_impl::on_inbox_complete, this);
  if (s == NATS_OK) s = natsConnection_FlushTimeout(conn_.get(), request_timeout_ms());
  if (s != NATS_OK) return nats_failure(step, s);
  std::lock_guard lock{mutex_};
  sweep_timer_ = std::make_unique<boost::asio::steady_timer>(workers_->get_executor());
  return bus_ok();
}

void client_impl::on_inbox_msg(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  auto* self = static_cast<client_impl*>(closure);
  msg_ptr owned{msg};
  self->route_inbox(owned.get());
  self->released_.release(std::move(owned));
}

void client_impl::on_inbox_complete(void* closure) {
  auto* self = static_cast<client_impl*>(closure);
  std::lock_guard lock{self->inbox_done_mutex_};
  self->inbox_done_ = true;
  self->inbox_done_cv_.notify_all();
}

void client_impl::route_inbox(natsMsg* msg) {
  std::string_view subject = natsMsg_GetSubject(msg);
  if (subject.size() < inbox_.size() + 3) return;
  subject.remove_prefix(inbox_.size() + 1);
  std::uint64_t id = 0;
  if (subject[0] != 'a' || subject[1] != '.' || !to_u64(subject.substr(2), id)) return;
  complete_publish(id, [&]() -> bus_status {
    if (natsMsg_IsNoResponders(msg))
      return failure("publish", std::string{"no JetStream stream stores this subject: is stream "} +
                                    stream_name + " still there?");
    if (plain_pub_ack(msg)) return bus_ok();
    auto ack = parse_api_reply("publish", msg);
    if (!ack) return ack.error();
    return bus_ok();
  }());
}

}  // namespace amqp::bus::detail
