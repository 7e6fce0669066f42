// A session's handshake: the protocol header, start/start-ok (and signing in to the bus), tune,
// open (and joining the vhost's account), and connection.update-secret.
#include "negotiation.hpp"
#include "sasl.hpp"
#include "registry.hpp"
#include "session.hpp"
#include "session_support.hpp"

namespace amqp::server {

void session::handle_protocol_header() {
  std::span<const std::uint8_t> first(in_.data() + in_start_, wire::protocol_header.size());
  if (!wire::is_protocol_header(first)) {
    // Spec §4.2.2: answer with the header we do speak, as the raw 8 octets, and close.
    warn("did not open with the AMQP 0-9-1 protocol header; answered with ours and closed");
    enqueue(std::string(wire::protocol_header.begin(), wire::protocol_header.end()));
    enter(phase::draining);
    close_deadline_ = clock::now() + options_.close_timeout;
    wake(watchdog_timer_);
    return;
  }
  in_start_ += wire::protocol_header.size();
  send_method(0, make_connection_start(settings_, external_offered()));
  enter(phase::start_ok);
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
  update_summary([&](session_summary& s) {
    for (auto [key, field] : {std::pair{"product", &s.client_product}, std::pair{"version", &s.client_version}})
      if (const auto* v = wire::find(m.client_properties, key))
        if (const auto* text = std::get_if<std::string>(&v->value)) *field = *text;
  });
  if (!options_.identities) {  // CLOUD_AMQP_AUTH=none: the response is neither read nor logged
    send_method(0, make_connection_tune(settings_));
    enter(phase::tune_ok);
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
  enter(phase::signing_in);
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
    if (self->ending()) return;
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
  enter(phase::tune_ok);
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
  update_summary([&](session_summary& s) {
    s.channel_max = channel_max_;
    s.frame_max = frame_max_;
    s.heartbeat = heartbeat_seconds_;
  });
  enter(phase::open);
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
  enter(phase::joining);
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
  update_summary([&](session_summary& s) {
    s.vhost = v.name;
    s.user = user_.empty() && !options_.identities ? "guest" : user_;
  });
  broker_ = v.broker;
  registry_->counted(session_registry::event::connection_opened);
  send_method(0, wire::connection_open_ok{});
  enter(phase::running);
  last_read_ = clock::now();
  wake(watchdog_timer_);  // the handshake deadline is over; heartbeats start
}

}  // namespace amqp::server
