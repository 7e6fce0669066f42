// A session's frames: framing the input, channel 0 after the handshake, the channels (their
// methods and content to the broker), and the port the broker answers through.
#include "session.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <type_traits>
#include <variant>

#include "registry.hpp"
#include "session_support.hpp"

namespace amqp::server {
namespace {

constexpr std::size_t initial_read_buffer = 8 * 1024;

}  // namespace

session::session(connection_stream stream, std::uint64_t id, std::shared_ptr<const vhost_map> vhosts,
                 const session_options& options, log_fn log, std::shared_ptr<session_registry> registry)
    : executor_(stream.socket().get_executor()),
      stream_(std::move(stream)),
      id_(id),
      vhosts_(std::move(vhosts)),
      bus_(vhosts_->at(std::string{default_vhost}).bus),  // "/" is always served
      options_(options),
      log_(std::move(log)),
      registry_(std::move(registry)),
      channel_max_(settings_.channel_max),
      frame_max_(settings_.frame_max),
      in_(initial_read_buffer),
      writer_wake_(executor_),
      reader_wake_(executor_),
      watchdog_timer_(executor_) {
  error_code ec;
  auto peer = stream_.socket().remote_endpoint(ec);
  peer_ = ec ? std::string("unknown peer") : peer.address().to_string() + ":" + std::to_string(peer.port());
  auto local = stream_.socket().local_endpoint(ec);
  summary_.id = id_;
  summary_.peer = peer_;
  summary_.local = ec ? std::string("unknown") : local.address().to_string() + ":" + std::to_string(local.port());
  summary_.tls = stream_.tls();
  summary_.connected_at_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                            std::chrono::system_clock::now().time_since_epoch())
                                                            .count());
  const auto now = clock::now();
  handshake_deadline_ = now + settings_.handshake_timeout;
  last_read_ = now;
  last_write_ = now;
}

session::~session() { registry_->remove(id_); }

void session::count_channels() {
  const auto now = static_cast<std::uint16_t>(channels_.size());
  std::uint16_t before = 0;
  update_summary([&](session_summary& s) {
    before = s.channels;
    s.channels = now;
  });
  for (; before < now; ++before) registry_->counted(session_registry::event::channel_opened);
  for (; before > now; --before) registry_->counted(session_registry::event::channel_closed);
}

session_summary session::summary() const {
  std::lock_guard lock{summary_mutex_};
  return summary_;
}

void session::start() {
  spawn(reader(shared_from_this()), "reader");
  spawn(writer(shared_from_this()), "writer");
  spawn(watchdog(shared_from_this()), "watchdog");
}

void session::spawn(awaitable<void> coroutine, const char* what) {
  net::co_spawn(executor_, std::move(coroutine), [log = log_, who = who(), what](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      log(log_level::error, who + ": " + what + " failed: " + x.what());
    } catch (...) {
      log(log_level::error, who + ": " + what + " failed with an unknown exception");
    }
  });
}

std::string session::who() const { return "connection " + std::to_string(id_) + " (" + peer_ + ")"; }

void session::warn(const std::string& message) { log_(log_level::warning, who() + ": " + message); }

void session::handle_buffered() {
  while (phase_ < phase::ended && !reading_paused()) {
    if (phase_ == phase::draining) {
      in_start_ = in_end_;
      return;
    }
    std::span<const std::uint8_t> data(in_.data() + in_start_, in_end_ - in_start_);
    if (phase_ == phase::protocol_header) {
      if (data.size() < wire::protocol_header.size()) return;
      handle_protocol_header();
      continue;
    }
    const auto parsed = wire::parse_frame(data, frame_max_);
    if (parsed.state == wire::parse_result::status::need_more) return;
    if (parsed.state == wire::parse_result::status::malformed) {
      // The stream cannot be framed any further: say why, then read nothing but EOF.
      connection_exception(parsed.error.code, parsed.error.text, {});
      enter(phase::draining);
      continue;
    }
    in_start_ += parsed.consumed;
    handle_frame(parsed.frame);
  }
}

void session::handle_frame(const wire::frame_view& f) {
  if (phase_ == phase::closing) {
    handle_while_closing(f);
    return;
  }
  // Any frame proves the peer alive (last_read_); parse_frame refused heartbeats off channel 0.
  if (f.type == wire::frame_type::heartbeat) return;
  if (f.channel == 0) {
    handle_channel_zero(f);
    return;
  }
  if (phase_ != phase::running) {
    connection_exception(wire::reply_code::channel_error,
                         "a frame on channel " + std::to_string(f.channel) +
                             " arrived before connection.open-ok; finish the handshake on channel 0 first",
                         f.type == wire::frame_type::method ? peek_key(f.payload) : wire::method_key{});
    return;
  }
  handle_channel_frame(f);
}

void session::handle_while_closing(const wire::frame_view& f) {
  // After connection.close only close-ok (or a crossing close) matters (spec §4.2.2 close).
  if (f.type != wire::frame_type::method || f.channel != 0) return;
  auto decoded = wire::decode_method(f.payload);
  if (!decoded) return;
  if (holds<wire::connection_close>(*decoded)) send_method(0, wire::connection_close_ok{});
  if (holds<wire::connection_close>(*decoded) || holds<wire::connection_close_ok>(*decoded)) end();
}

void session::handle_channel_zero(const wire::frame_view& f) {
  if (f.type != wire::frame_type::method) {
    connection_exception(wire::reply_code::unexpected_frame,
                         "a content frame arrived on channel 0; content belongs on the channel that "
                         "sent basic.publish",
                         {});
    return;
  }
  auto decoded = wire::decode_method(f.payload);
  if (!decoded) {
    connection_exception(decoded.error().code, decoded.error().text, peek_key(f.payload));
    return;
  }
  wire::method& m = *decoded;
  if (holds<wire::connection_close>(m)) {
    send_method(0, wire::connection_close_ok{});
    closed_by_client();
    return;
  }
  if (holds<wire::connection_close_ok>(m)) {
    end();
    return;
  }
  if (phase_ != phase::running) {
    handle_handshake_method(m);
    return;
  }
  if (holds<wire::connection_update_secret>(m)) {
    on_update_secret(std::get<wire::connection_update_secret>(m));
    return;
  }
  if (holds<wire::channel_open>(m)) {
    connection_exception(wire::reply_code::channel_error,
                         "channel.open on channel 0, which is the connection's own; open channels 1 to " +
                             std::to_string(channel_max_),
                         wire::channel_open::key);
    return;
  }
  connection_exception(wire::reply_code::command_invalid,
                       name_of(m) + " is not valid on channel 0; after the handshake channel 0 carries "
                                    "only connection.close, connection.close-ok, connection.update-secret "
                                    "and heartbeats",
                       wire::info_of(m).key);
}

// ---- channels ---------------------------------------------------------------------------------

void session::handle_channel_frame(const wire::frame_view& f) {
  const auto key = f.type == wire::frame_type::method ? peek_key(f.payload) : wire::method_key{};
  if (f.channel > channel_max_) {
    connection_exception(wire::reply_code::channel_error,
                         "channel " + std::to_string(f.channel) + " is over the negotiated channel-max of " +
                             std::to_string(channel_max_) + "; use channels 1 to " + std::to_string(channel_max_),
                         key);
    return;
  }
  auto it = channels_.find(f.channel);
  if (it == channels_.end()) {
    handle_unopened_channel(f);
    return;
  }
  channel_slot& slot = it->second;
  if (slot.state != slot_state::open) {
    handle_closing_channel(f.channel, slot, f);
    return;
  }
  switch (f.type) {
    case wire::frame_type::method: {
      auto decoded = wire::decode_method(f.payload);
      if (!decoded) {
        connection_exception(decoded.error().code, decoded.error().text, key);
        return;
      }
      handle_channel_method(f.channel, slot, std::move(*decoded));
      return;
    }
    case wire::frame_type::header: handle_header(f.channel, slot, f); return;
    case wire::frame_type::body: handle_body(f.channel, slot, f); return;
    case wire::frame_type::heartbeat: return;  // parse_frame refuses these off channel 0
  }
}

void session::handle_unopened_channel(const wire::frame_view& f) {
  const std::string where = "channel " + std::to_string(f.channel);
  if (f.type != wire::frame_type::method) {
    connection_exception(wire::reply_code::channel_error,
                         "a content frame on " + where + ", which is not open; send channel.open first", {});
    return;
  }
  auto decoded = wire::decode_method(f.payload);
  if (!decoded) {
    connection_exception(decoded.error().code, decoded.error().text, peek_key(f.payload));
    return;
  }
  if (holds<wire::channel_open>(*decoded)) {
    open_channel(f.channel);
    return;
  }
  connection_exception(wire::reply_code::channel_error,
                       name_of(*decoded) + " on " + where + ", which is not open; send channel.open first",
                       wire::info_of(*decoded).key);
}

void session::handle_closing_channel(std::uint16_t id, channel_slot& slot, const wire::frame_view& f) {
  // We sent channel.close: everything but its answer is dropped (spec §4.2.2 channel close),
  // including the body frames of a publish refused on its header. A close of the client's own
  // crossing ours is answered too, and the client's close-ok for ours still ends it.
  if (f.type != wire::frame_type::method) return;
  auto decoded = wire::decode_method(f.payload);
  if (!decoded) return;
  if (holds<wire::channel_close_ok>(*decoded)) {
    channels_.erase(id);
    count_channels();
  } else if (holds<wire::channel_close>(*decoded)) {
    send_method(id, wire::channel_close_ok{});
    slot.state = slot_state::crossed;
  } else if (holds<wire::channel_open>(*decoded) && slot.state == slot_state::crossed) {
    // A client that took our close-ok for the end of both closes opens the id again.
    channels_.erase(id);
    count_channels();
    open_channel(id);
  }
}

void session::handle_channel_method(std::uint16_t id, channel_slot& slot, wire::method m) {
  const auto key = wire::info_of(m).key;
  const std::string where = "channel " + std::to_string(id);
  if (slot.content.active()) {
    connection_exception(wire::reply_code::unexpected_frame,
                         name_of(m) + " arrived on " + where +
                             " before the content of its basic.publish was complete; send the content "
                             "header and every body frame first",
                         key);
    return;
  }
  if (holds<wire::channel_open>(m)) {
    connection_exception(wire::reply_code::channel_error,
                         where + " is already open; open another channel id or close this one first", key);
    return;
  }
  if (holds<wire::channel_close>(m)) {
    client_closed_channel(id);
    return;
  }
  if (holds<wire::channel_close_ok>(m)) {
    connection_exception(wire::reply_code::command_invalid,
                         "channel.close-ok on " + where + ", which the server did not close", key);
    return;
  }
  if (key.class_id == wire::connection_start::key.class_id) {
    connection_exception(wire::reply_code::command_invalid,
                         name_of(m) + " on " + where + "; connection methods belong on channel 0", key);
    return;
  }
  if (auto* publish = std::get_if<wire::basic_publish>(&m)) {
    slot.content.begin(std::move(*publish));
    return;
  }
  call_broker(key, [&] { slot.channel->on_method(std::move(m)); });
}

void session::handle_header(std::uint16_t id, channel_slot& slot, const wire::frame_view& f) {
  constexpr auto publish_key = wire::basic_publish::key;
  const std::string where = "channel " + std::to_string(id);
  if (slot.content.state() != content_assembly::expecting::header) {
    const bool mid_body = slot.content.state() == content_assembly::expecting::body;
    connection_exception(wire::reply_code::unexpected_frame,
                         mid_body ? "a second content header on " + where + " while body frames were due"
                                  : "a content header on " + where + " without a basic.publish before it",
                         publish_key);
    return;
  }
  auto header = wire::decode_content_header(f.payload);
  if (!header) {
    connection_exception(header.error().code, header.error().text, publish_key);
    return;
  }
  if (header->class_id != publish_key.class_id) {
    // Spec §4.2.6.1: a header's class must be the class of the method it follows.
    connection_exception(wire::reply_code::frame_error,
                         "the content header on " + where + " is for class " + std::to_string(header->class_id) +
                             ", but basic.publish (class " + std::to_string(publish_key.class_id) + ") preceded it",
                         publish_key);
    return;
  }
  switch (slot.content.on_header(header->body_size, header->property_octets, settings_.max_body_size)) {
    case content_assembly::outcome::too_large:
      // Refused on the header, before any body octet is buffered; the channel's close makes
      // the session drop the body frames that follow.
      close_channel(id, wire::reply_code::content_too_large,
                    "body of " + std::to_string(header->body_size) + " octets is over the bus maximum of " +
                        std::to_string(settings_.max_body_size) +
                        "; split the message or raise CLOUD_PUBSUB_MAX_PAYLOAD",
                    publish_key);
      return;
    case content_assembly::outcome::complete: hand_publish_to_broker(slot); return;
    case content_assembly::outcome::incomplete:
    case content_assembly::outcome::overrun: return;
  }
}

void session::handle_body(std::uint16_t id, channel_slot& slot, const wire::frame_view& f) {
  constexpr auto publish_key = wire::basic_publish::key;
  const std::string where = "channel " + std::to_string(id);
  if (slot.content.state() != content_assembly::expecting::body) {
    connection_exception(wire::reply_code::unexpected_frame,
                         "a body frame on " + where + " without a content header before it", publish_key);
    return;
  }
  switch (slot.content.on_body(f.payload)) {
    case content_assembly::outcome::overrun:
      connection_exception(wire::reply_code::frame_error,
                           "body frames on " + where + " carry more than the " +
                               std::to_string(slot.content.declared_size()) +
                               " octets their content header declared",
                           publish_key);
      return;
    case content_assembly::outcome::complete: hand_publish_to_broker(slot); return;
    case content_assembly::outcome::incomplete:
    case content_assembly::outcome::too_large: return;
  }
}

void session::hand_publish_to_broker(channel_slot& slot) {
  auto publish = slot.content.take();
  call_broker(wire::basic_publish::key, [&] {
    slot.channel->on_publish(std::move(publish.method), std::move(publish.property_octets),
                             std::move(publish.body));
  });
}

void session::open_channel(std::uint16_t id) {
  std::unique_ptr<broker::channel> opened;
  try {
    opened = broker::open_channel(broker_, *this, id);
  } catch (const std::exception& e) {
    connection_exception(wire::reply_code::internal_error,
                         "channel " + std::to_string(id) + " could not be opened: " + e.what() + "; reconnect",
                         wire::channel_open::key);
    return;
  }
  if (!opened) {
    connection_exception(wire::reply_code::internal_error,
                         "channel " + std::to_string(id) + " could not be opened; reconnect",
                         wire::channel_open::key);
    return;
  }
  channels_[id].channel = std::move(opened);
  count_channels();
  send_method(id, wire::channel_open_ok{});
}

void session::client_closed_channel(std::uint16_t id) {
  auto it = channels_.find(id);
  close_broker_channel(it->second);
  channels_.erase(it);
  count_channels();
  send_method(id, wire::channel_close_ok{});
}

void session::close_broker_channel(channel_slot& slot) {
  if (slot.state != slot_state::open) return;
  slot.state = slot_state::closing;
  call_broker({}, [&] { slot.channel->closed(); });
}

template <class Call>
void session::call_broker(wire::method_key key, Call&& call) {
  // The broker answers in AMQP's vocabulary through this port; an exception is a bug in it,
  // and the connection is the smallest thing that can be closed safely.
  try {
    call();
  } catch (const std::exception& e) {
    connection_exception(wire::reply_code::internal_error,
                         std::string("the broker failed: ") + e.what() + "; reconnect and retry", key);
  }
}

// ---- the port the broker uses ----------------------------------------------------------------

void session::send(std::string frames) {
  // After connection.close only close/close-ok may be sent (spec §4.2.2): the broker's late
  // output no longer reaches anyone.
  if (ending()) return;
  enqueue(std::move(frames));
}

void session::close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                            wire::method_key offending) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || it->second.state != slot_state::open) return;
  if (ending()) return;
  channel_slot& slot = it->second;
  slot.content.reset();
  wire::channel_close close;
  close.reply_code = static_cast<std::uint16_t>(code);
  close.reply_text = wire::reply_text(code, sentence);
  close.class_id = offending.class_id;
  close.method_id = offending.method_id;
  send_method(channel, close);
  close_broker_channel(slot);
}

void session::close_connection(wire::reply_code code, std::string sentence, wire::method_key offending) {
  connection_exception(code, sentence, offending);
}

void session::close_for_shutdown() {
  if (phase_ == phase::protocol_header) {
    close_socket();
    return;
  }
  send_connection_close(wire::reply_code::connection_forced,
                        "the server is shutting down; reconnect to another replica", {});
}

void session::abort() { close_socket(); }

}  // namespace amqp::server
