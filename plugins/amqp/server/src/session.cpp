#include "session.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <type_traits>
#include <variant>

#include "negotiation.hpp"
#include "registry.hpp"
#include "sasl.hpp"

namespace amqp::server {
namespace {

template <class T>
bool holds(const wire::method& m) {
  return std::holds_alternative<T>(m);
}

// The class and method a method frame names, read from its first four octets, so that a
// frame that fails to decode can still be named in connection.close.
wire::method_key peek_key(std::span<const std::uint8_t> payload) {
  if (payload.size() < 4) return {};
  auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>((payload[at] << 8) | payload[at + 1]);
  };
  return {u16(0), u16(2)};
}

std::string name_of(const wire::method& m) { return std::string(wire::info_of(m).name); }

// "NAME - sentence": the broker hands over texts already in that shape, the session's own
// refusals are bare sentences; either way the client gets the shape exactly once.
std::string as_reply_text(wire::reply_code code, const std::string& text) {
  const std::string prefix = std::string(wire::reply_name(code)) + " - ";
  return text.rfind(prefix, 0) == 0 ? text : wire::reply_text(code, text);
}

constexpr std::size_t initial_read_buffer = 8 * 1024;
constexpr std::size_t max_write_batch = 64;  // frames gathered into one write

}  // namespace

session::session(connection_stream stream, std::uint64_t id, std::shared_ptr<const vhost_map> vhosts,
                 const session_options& options, log_fn log, std::shared_ptr<session_registry> registry)
    : executor_(stream.socket().get_executor()),
      stream_(std::move(stream)),
      id_(id),
      vhosts_(std::move(vhosts)),
      bus_(find_vhost(*vhosts_, default_vhost)->bus),
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
  const auto now = clock::now();
  handshake_deadline_ = now + settings_.handshake_timeout;
  last_read_ = now;
  last_write_ = now;
}

session::~session() { registry_->remove(id_); }

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

// ---- reader ---------------------------------------------------------------------------------

awaitable<void> session::reader([[maybe_unused]] std::shared_ptr<session> self) {
  std::exception_ptr failure;
  try {
    error_code ec;
    co_await stream_.handshake(ec);
    if (ec) {
      warn("TLS handshake failed (" + ec.message() + "); closing");
      close_socket();
    } else {
      certificate_user_ = stream_.verified_peer_name();
      co_await read_loop();
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // Whatever ended the input, the channels and the broker hear about it exactly once.
  if (failure) close_socket();
  teardown();
  if (failure) std::rethrow_exception(failure);
}

awaitable<void> session::read_loop() {
  for (;;) {
    handle_buffered();
    if (phase_ == phase::ended || socket_closed_) co_return;
    if (reading_paused()) {
      co_await wait_for_drain();
      continue;
    }
    // g++ 12 miscompiles a co_await inside an if-condition here (SIGILL when the coroutine
    // resumes): keep the awaited value in a variable.
    const bool more = co_await read_more();
    if (!more) co_return;
  }
}

awaitable<bool> session::read_more() {
  if (in_start_ > 0) {
    std::copy(in_.begin() + static_cast<std::ptrdiff_t>(in_start_),
              in_.begin() + static_cast<std::ptrdiff_t>(in_end_), in_.begin());
    in_end_ -= in_start_;
    in_start_ = 0;
  }
  if (in_end_ == in_.size()) {
    // parse_frame refuses a frame over frame-max from its header, so a buffer of frame-max
    // octets always holds a whole frame: the buffer never grows past it.
    const std::size_t limit = std::max<std::size_t>(frame_max_, wire::min_frame_max);
    if (in_.size() >= limit) {
      close_socket();
      co_return false;
    }
    in_.resize(std::min(in_.size() * 2, limit));
  }
  error_code ec;
  const std::size_t n = co_await stream_.read_some(net::buffer(in_.data() + in_end_, in_.size() - in_end_), ec);
  if (ec) co_return false;  // EOF, reset or our own close: the reader's end handles all alike
  in_end_ += n;
  last_read_ = clock::now();
  co_return true;
}

awaitable<void> session::wait_for_drain() {
  // Back-pressure: the client is not reading what we send, or the bus is not keeping up with
  // what it publishes, so we stop reading what it sends (and stop handing the broker more
  // work) until the writer has caught up and the bus has answered enough.
  reader_waiting_ = true;
  reader_wake_.expires_at(clock::time_point::max());
  error_code ec;
  co_await reader_wake_.async_wait(with_ec(ec));
  reader_waiting_ = false;
}

void session::handle_buffered() {
  while (phase_ != phase::ended && !socket_closed_ && !reading_paused()) {
    if (discarding_) {
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
      discarding_ = true;
      shutdown_send_after_flush_ = true;
      continue;
    }
    in_start_ += parsed.consumed;
    handle_frame(parsed.frame);
  }
}

void session::handle_protocol_header() {
  std::span<const std::uint8_t> first(in_.data() + in_start_, wire::protocol_header.size());
  if (!wire::is_protocol_header(first)) {
    // Spec §4.2.2: answer with the header we do speak, as the raw 8 octets, and close.
    warn("did not open with the AMQP 0-9-1 protocol header; answered with ours and closed");
    enqueue(std::string(wire::protocol_header.begin(), wire::protocol_header.end()));
    phase_ = phase::closing;
    discarding_ = true;
    shutdown_send_after_flush_ = true;
    close_deadline_ = clock::now() + options_.close_timeout;
    wake(watchdog_timer_);
    return;
  }
  in_start_ += wire::protocol_header.size();
  send_method(0, make_connection_start(settings_, external_offered()));
  phase_ = phase::start_ok;
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

void session::handle_handshake_method(wire::method& m) {
  if (phase_ == phase::start_ok && holds<wire::connection_start_ok>(m)) {
    on_start_ok(std::get<wire::connection_start_ok>(m));
  } else if (phase_ == phase::tune_ok && holds<wire::connection_tune_ok>(m)) {
    on_tune_ok(std::get<wire::connection_tune_ok>(m));
  } else if (phase_ == phase::open && holds<wire::connection_open>(m)) {
    on_open(std::get<wire::connection_open>(m));
  } else {
    const char* due = phase_ == phase::start_ok     ? "connection.start-ok was due"
                      : phase_ == phase::signing_in ? "nothing was due until connection.tune"
                      : phase_ == phase::tune_ok    ? "connection.tune-ok was due"
                      : phase_ == phase::joining    ? "nothing was due until connection.open-ok"
                                                    : "connection.open was due";
    connection_exception(wire::reply_code::command_invalid,
                         name_of(m) + " arrived during the handshake, where " + due,
                         wire::info_of(m).key);
  }
}

// ---- handshake --------------------------------------------------------------------------------

void session::on_start_ok(const wire::connection_start_ok& m) {
  if (!is_offered_mechanism(m.mechanism, external_offered())) {
    connection_exception(wire::reply_code::access_refused,
                         "SASL mechanism '" + m.mechanism + "' is not offered; use " +
                             (external_offered() ? "EXTERNAL, PLAIN or AMQPLAIN" : "PLAIN or AMQPLAIN"),
                         wire::connection_start_ok::key);
    return;
  }
  if (m.mechanism == "EXTERNAL") user_ = certificate_user_;
  if (!options_.identities) {  // CLOUD_AMQP_AUTH=none: the response is neither read nor logged
    send_method(0, make_connection_tune(settings_));
    phase_ = phase::tune_ok;
    return;
  }
  auto who = read_credentials(m.mechanism, m.response);
  if (auto* malformed = std::get_if<std::string>(&who)) {
    warn("login refused: " + *malformed);
    connection_exception(wire::reply_code::access_refused, *malformed + "; send the user and password as " +
                                                               m.mechanism + " defines them",
                         wire::connection_start_ok::key);
    return;
  }
  phase_ = phase::signing_in;
  off_the_loop([identities = options_.identities, who = std::get<bus::credentials>(who),
                deadline = handshake_deadline_] { return identities->sign_in(who, deadline); },
               [mechanism = m.mechanism, who = std::get<bus::credentials>(who)](
                   session& s, bus::bus_result<std::shared_ptr<bus::client>> client) {
                 s.signed_in(mechanism, who, std::move(client));
               });
}

template <class Work, class Then>
void session::off_the_loop(Work work, Then then) {
  bus_->run_blocking(executor_, std::move(work), [self = shared_from_this(), then = std::move(then)](auto result) mutable {
    if (self->socket_closed_ || self->phase_ == phase::closing || self->phase_ == phase::ended) return;
    then(*self, std::move(result));
  });
}

// RabbitMQ's answer to refused credentials names only the mechanism; the cause is logged.
void session::signed_in(const std::string& mechanism, const bus::credentials& who,
                        bus::bus_result<std::shared_ptr<bus::client>> client) {
  const std::string name = who.user.empty() ? std::string("a token's user") : "user '" + who.user + "'";
  if (!client) {
    warn("login of " + name + " failed: " + client.error().text);
    if (client.error().kind == bus::bus_errc::denied) {
      send_connection_close(wire::reply_code::access_refused,
                            "Login was refused using authentication mechanism " + mechanism +
                                ". For details see the broker logfile.",
                            wire::connection_start_ok::key);
    } else {
      send_connection_close(wire::reply_code::internal_error,
                            "the bus could not check the credentials (" + client.error().text + "); retry",
                            wire::connection_start_ok::key);
    }
    return;
  }
  bus_ = std::move(*client);
  user_ = who.user;
  send_method(0, make_connection_tune(settings_));
  phase_ = phase::tune_ok;
}

// RabbitMQ's extension for refreshing a token (amqplib and the Java client send it). Under
// authentication the bus checks the new secret for the connection's user in its vhost, and the
// channels opened after it use the client it signs in; a refused one ends the connection (403).
void session::on_update_secret(const wire::connection_update_secret& m) {
  if (!options_.identities) {
    send_method(0, wire::connection_update_secret_ok{});
    return;
  }
  off_the_loop(
      [identities = options_.identities, who = bus::credentials{user_, m.new_secret}, service = vhost_->bus,
       deadline = clock::now() + settings_.handshake_timeout]() -> bus::bus_result<std::shared_ptr<bus::client>> {
        auto client = identities->sign_in(who, deadline);
        if (!client) return client;
        if (auto joined = (*client)->join(*service); !joined) return joined.error();
        return client;
      },
      [](session& s, bus::bus_result<std::shared_ptr<bus::client>> client) {
            if (!client) {
              s.warn("connection.update-secret failed: " + client.error().text);
              const bool refused = client.error().kind == bus::bus_errc::denied;
              s.send_connection_close(refused ? wire::reply_code::access_refused : wire::reply_code::internal_error,
                                      refused ? "the bus refused the new secret of connection.update-secret"
                                              : "the bus could not check the new secret (" + client.error().text +
                                                    "); reconnect",
                                      wire::connection_update_secret::key);
              return;
            }
            s.bus_ = std::move(*client);
            s.send_method(0, wire::connection_update_secret_ok{});
          });
}

void session::on_tune_ok(const wire::connection_tune_ok& m) {
  auto negotiated = negotiate(settings_, m);
  if (const auto* refusal = std::get_if<std::string>(&negotiated)) {
    connection_exception(wire::reply_code::not_allowed, *refusal, wire::connection_tune_ok::key);
    return;
  }
  const auto& t = std::get<tuned>(negotiated);
  channel_max_ = t.channel_max;
  frame_max_ = t.frame_max;
  heartbeat_seconds_ = t.heartbeat_seconds;
  phase_ = phase::open;
}

// The vhost must be one this process serves; a signed-in user must be of its NATS account
// (530 NOT_ALLOWED otherwise, in RabbitMQ's words).
void session::on_open(const wire::connection_open& m) {
  const vhost* v = find_vhost(*vhosts_, m.virtual_host);
  if (v == nullptr) {
    std::string served;
    for (const auto& [name, unused] : *vhosts_) served += (served.empty() ? "'" : ", '") + name + "'";
    connection_exception(wire::reply_code::not_allowed,
                         "vhost '" + m.virtual_host + "' not found; this server has " + served +
                             " (CLOUD_AMQP_VHOSTS lists the others)",
                         wire::connection_open::key);
    return;
  }
  if (!options_.identities) {
    bus_ = v->bus;
    opened(*v);
    return;
  }
  phase_ = phase::joining;
  off_the_loop([user = bus_, service = v->bus] { return user->join(*service); },
               [v](session& s, bus::bus_status joined) {
                 if (joined) return s.opened(*v);
                 s.warn("opening vhost '" + v->name + "' failed: " + joined.error().text);
                 const bool refused = joined.error().kind == bus::bus_errc::denied;
                 s.send_connection_close(
                     refused ? wire::reply_code::not_allowed : wire::reply_code::internal_error,
                     refused ? "access to vhost '" + v->name + "' refused for user '" + s.user_ + "'"
                             : "the bus could not open vhost '" + v->name + "' (" + joined.error().text + "); retry",
                     wire::connection_open::key);
               });
}

void session::opened(const vhost& v) {
  vhost_ = &v;
  broker_ = v.broker;
  send_method(0, wire::connection_open_ok{});
  phase_ = phase::running;
  last_read_ = clock::now();
  wake(watchdog_timer_);  // the handshake deadline is over; heartbeats start
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
  if (slot.closing) {
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
  } else if (holds<wire::channel_close>(*decoded)) {
    send_method(id, wire::channel_close_ok{});
    slot.crossed = true;
  } else if (holds<wire::channel_open>(*decoded) && slot.crossed) {
    // A client that took our close-ok for the end of both closes opens the id again.
    channels_.erase(id);
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
      // the session drop the body frames that follow (DESIGN.md §7).
      close_channel(id, wire::reply_code::content_too_large,
                    "body of " + std::to_string(header->body_size) + " octets is over the bus maximum of " +
                        std::to_string(settings_.max_body_size) +
                        "; split the message or raise CLOUD_PUBSUB_MAX_PAYLOAD",
                    publish_key);
      return;
    case content_assembly::outcome::complete: deliver(slot); return;
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
    case content_assembly::outcome::complete: deliver(slot); return;
    case content_assembly::outcome::incomplete:
    case content_assembly::outcome::too_large: return;
  }
}

void session::deliver(channel_slot& slot) {
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
  send_method(id, wire::channel_open_ok{});
}

void session::client_closed_channel(std::uint16_t id) {
  auto it = channels_.find(id);
  notify_closed(it->second);
  channels_.erase(it);
  send_method(id, wire::channel_close_ok{});
}

void session::notify_closed(channel_slot& slot) {
  if (slot.closed_notified) return;
  slot.closed_notified = true;
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
  if (phase_ == phase::closing || phase_ == phase::ended || socket_closed_) return;
  enqueue(std::move(frames));
}

void session::close_channel(std::uint16_t channel, wire::reply_code code, std::string text,
                            wire::method_key offending) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || it->second.closing) return;
  if (phase_ == phase::closing || phase_ == phase::ended) return;
  channel_slot& slot = it->second;
  slot.closing = true;
  slot.content.reset();
  wire::channel_close close;
  close.reply_code = static_cast<std::uint16_t>(code);
  close.reply_text = as_reply_text(code, text);
  close.class_id = offending.class_id;
  close.method_id = offending.method_id;
  send_method(channel, close);
  notify_closed(slot);
}

void session::close_connection(wire::reply_code code, std::string text, wire::method_key offending) {
  connection_exception(code, text, offending);
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

// ---- output and ending ------------------------------------------------------------------------

template <class M>
void session::send_method(std::uint16_t channel, const M& m) {
  std::string frame;
  wire::encode_method(frame, channel, m);
  enqueue(std::move(frame));
}

void session::enqueue(std::string frames) {
  if (frames.empty() || socket_closed_) return;
  queued_bytes_ += frames.size();
  out_.push_back(std::move(frames));
  wake(writer_wake_);
}

void session::connection_exception(wire::reply_code code, const std::string& sentence, wire::method_key key) {
  if (phase_ == phase::closing || phase_ == phase::ended || socket_closed_) return;
  warn("closing the connection: " + as_reply_text(code, sentence));
  send_connection_close(code, sentence, key);
}

void session::send_connection_close(wire::reply_code code, const std::string& sentence, wire::method_key key) {
  if (phase_ == phase::closing || phase_ == phase::ended || socket_closed_) return;
  wire::connection_close close;
  close.reply_code = static_cast<std::uint16_t>(code);
  close.reply_text = as_reply_text(code, sentence);
  close.class_id = key.class_id;
  close.method_id = key.method_id;
  send_method(0, close);
  phase_ = phase::closing;
  close_deadline_ = clock::now() + options_.close_timeout;
  wake(watchdog_timer_);
}

void session::end() { phase_ = phase::ended; }

// The client closed the connection and we answered close-ok. A client may have written more
// behind its close (amqplib pipelines publishes behind it): closing the socket on unread input
// would reset the connection and lose the close-ok at the peer. So the channels go now, what
// arrives is read and dropped, our side of the socket is shut once close-ok is out, and the
// socket closes at the client's EOF (or the close timeout).
void session::closed_by_client() {
  release_channels();
  phase_ = phase::closing;
  discarding_ = true;
  shutdown_send_after_flush_ = true;
  close_deadline_ = clock::now() + options_.close_timeout;
  wake(writer_wake_);
  wake(watchdog_timer_);
}

void session::release_channels() {
  for (auto& [id, slot] : channels_) notify_closed(slot);
  channels_.clear();
  if (channels_released_) return;
  channels_released_ = true;
  if (!broker_) return;  // never opened a vhost
  try {
    broker::connection_closed(*broker_, id_);
  } catch (const std::exception& e) {
    warn(std::string("releasing the connection's exclusive queues failed: ") + e.what());
  }
}

void session::teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  phase_ = phase::ended;
  release_channels();
  // The writer flushes what is queued (a close-ok, say) and then closes the socket; the
  // watchdog bounds how long that may take.
  close_deadline_ = clock::now() + options_.close_timeout;
  wake(writer_wake_);
  wake(watchdog_timer_);
}

void session::close_socket() {
  if (socket_closed_) return;
  socket_closed_ = true;
  error_code ec;
  // Closing a socket with unread input makes the kernel answer with a reset, which can
  // overtake our last frames (a close-ok) at the peer; what the peer sent after its close is
  // meaningless anyway, so it is read and dropped first.
  std::array<std::uint8_t, 4096> sink{};
  auto& socket = stream_.socket();
  while (!ec && socket.available(ec) > 0) socket.read_some(net::buffer(sink), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
  writer_wake_.cancel();
  reader_wake_.cancel();
  watchdog_timer_.cancel();
  on_drained_.clear();
}

// ---- writer -----------------------------------------------------------------------------------

awaitable<void> session::writer([[maybe_unused]] std::shared_ptr<session> self) {
  std::vector<std::string> batch;
  std::vector<net::const_buffer> buffers;
  while (!socket_closed_) {
    if (out_.empty()) {
      if (phase_ == phase::ended || (shutdown_send_after_flush_ && stream_.tls())) {
        // Everything, down to the last close-ok, is on the wire. A TLS peer is told so with
        // close_notify (and what it still sends is read and dropped meanwhile); the close
        // deadline (watchdog) bounds the wait for its answer.
        error_code ignored;
        co_await stream_.end_tls(ignored);
        close_socket();
        co_return;
      }
      if (shutdown_send_after_flush_) {
        // The peer sees EOF after our last octet and closes; we keep reading until it does,
        // so that closing never turns into a reset that loses what we sent.
        shutdown_send_after_flush_ = false;
        error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      }
      writer_wake_.expires_at(clock::time_point::max());
      error_code ec;
      co_await writer_wake_.async_wait(with_ec(ec));
      continue;
    }
    batch.clear();
    buffers.clear();
    while (!out_.empty() && batch.size() < max_write_batch) {
      batch.push_back(std::move(out_.front()));
      out_.pop_front();
    }
    for (const auto& frames : batch) buffers.push_back(net::buffer(frames));
    error_code ec;
    co_await stream_.write(buffers, ec);
    for (const auto& frames : batch) queued_bytes_ -= frames.size();
    if (ec) {
      close_socket();
      co_return;
    }
    last_write_ = clock::now();
    if (queued_bytes_ <= options_.outbound_cap / 2) resume_producers();
  }
}

void session::when_drained(std::function<void()> resume) {
  if (socket_closed_) return;
  if (!backlogged()) {
    net::post(executor_, std::move(resume));
    return;
  }
  on_drained_.push_back(std::move(resume));
}

void session::publish_answered(std::size_t cost) {
  publishing_ -= std::min(cost, publishing_);
  if (reader_waiting_ && !backlogged() && publishing_ <= options_.publish_cap / 2) wake(reader_wake_);
}

// The writer caught up: the reader (stopped by back-pressure) and anything that waited in
// when_drained go on. Callbacks are posted, not called: they may enqueue more output.
void session::resume_producers() {
  if (reader_waiting_ && publishing_ <= options_.publish_cap / 2) wake(reader_wake_);
  for (auto& resume : on_drained_) net::post(executor_, std::move(resume));
  on_drained_.clear();
}

// ---- watchdog ---------------------------------------------------------------------------------

awaitable<void> session::watchdog([[maybe_unused]] std::shared_ptr<session> self) {
  while (!socket_closed_) {
    const auto now = clock::now();
    if (!check_deadlines(now)) co_return;
    watchdog_timer_.expires_at(next_deadline(now));
    error_code ec;
    co_await watchdog_timer_.async_wait(with_ec(ec));
  }
}

bool session::check_deadlines(clock::time_point now) {
  if (phase_ == phase::closing || phase_ == phase::ended) {
    if (now < close_deadline_) return true;
    if (stream_.tls() && !tls_ending_) {
      // No close-ok in time: the writer ends the TLS session (close_notify) once its queue is
      // out, within one more close timeout.
      tls_ending_ = true;
      phase_ = phase::ended;
      close_deadline_ = now + options_.close_timeout;
      wake(writer_wake_);
      return true;
    }
    close_socket();  // no close-ok, or the last write did not drain, in time
    return false;
  }
  if (phase_ != phase::running) {
    if (now < handshake_deadline_) return true;
    warn("did not complete the handshake within " + std::to_string(settings_.handshake_timeout.count()) +
         " s (CLOUD_AMQP_HANDSHAKE_TIMEOUT); dropped");
    close_socket();
    return false;
  }
  if (heartbeat_seconds_ == 0) return true;
  const std::chrono::milliseconds interval = std::chrono::seconds{heartbeat_seconds_};
  // While we are not reading (back-pressure), a writer that still makes progress is the
  // sign of life; otherwise any octet read is.
  const auto alive = reader_waiting_ ? std::max(last_read_, last_write_) : last_read_;
  if (now - alive >= 2 * interval) {
    warn("sent nothing for two heartbeat intervals (2 x " + std::to_string(heartbeat_seconds_) +
         " s); dropped");
    close_socket();
    return false;
  }
  if (now - last_write_ >= interval / 2 && out_.empty()) {
    std::string heartbeat;
    wire::encode_heartbeat(heartbeat);
    enqueue(std::move(heartbeat));
    last_write_ = now;
  }
  return true;
}

clock::time_point session::next_deadline(clock::time_point now) const {
  if (phase_ == phase::closing || phase_ == phase::ended) return close_deadline_;
  if (phase_ != phase::running) return handshake_deadline_;
  if (heartbeat_seconds_ == 0) return clock::time_point::max();
  const std::chrono::milliseconds interval = std::chrono::seconds{heartbeat_seconds_};
  const auto alive = reader_waiting_ ? std::max(last_read_, last_write_) : last_read_;
  auto next_beat = last_write_ + interval / 2;
  if (next_beat <= now) next_beat = now + interval / 2;  // a write is pending; look again later
  return std::min(alive + 2 * interval, next_beat);
}

}  // namespace amqp::server
