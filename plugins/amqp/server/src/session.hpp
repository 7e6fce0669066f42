#pragma once
// One AMQP connection: the handshake, heartbeats, channel bookkeeping and content assembly.
// Everything a session does runs on its executor, which is one thread's (server.hpp: a loop):
// a reader, a writer and a watchdog coroutine share the state below without locks. What channel
// methods mean is the broker's (broker::channel); the session only decides which channel a frame
// belongs to. Its files: session.cpp (frames to channels, the broker's port), handshake.cpp
// (connection.start to open-ok, signing in), session_io.cpp (the socket, output, deadlines).
#include "net.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/wire/codec.hpp"
#include "connection_stream.hpp"
#include "content_assembly.hpp"
#include "identities.hpp"
#include "log.hpp"
#include "vhosts.hpp"

namespace amqp::server {

class session_registry;

struct session_options {
  broker::settings settings;
  // Encoded frames waiting for the socket above which the reader stops reading (and so
  // stops feeding the broker) until the writer has drained to half of it.
  std::size_t outbound_cap = 4 * 1024 * 1024;
  // Publishes handed to the bus and not yet answered (content plus a per-message overhead)
  // above which the reader also stops, until they fall to half of it (connection_port).
  std::size_t publish_cap = 8 * 1024 * 1024;
  // How long a closing connection waits for close-ok, and a finished one for its last write.
  std::chrono::milliseconds close_timeout{2000};
  // Set (CLOUD_AMQP_AUTH=bus): a connection signs in to the bus with its credentials, and its
  // channels use that user's bus client. Unset: every connection uses the adaptor's own.
  std::shared_ptr<server::identities> identities;
};

// What an operator sees of a connection (the management API's list); copied out under a lock.
struct session_summary {
  std::uint64_t id = 0;
  std::string peer;    // "host:port"
  std::string local;   // "host:port"
  bool tls = false;
  std::string vhost;   // "" until connection.open
  std::string user;
  std::uint16_t channels = 0;
  std::uint16_t channel_max = 0;
  std::uint32_t frame_max = 0;
  std::uint16_t heartbeat = 0;
  std::uint64_t connected_at_ms = 0;
  bool running = false;
  std::string client_product;
  std::string client_version;
};

class session final : public broker::connection_port, public std::enable_shared_from_this<session> {
 public:
  session(connection_stream stream, std::uint64_t id, std::shared_ptr<const vhost_map> vhosts,
          const session_options& options, log_fn log, std::shared_ptr<session_registry> registry);
  ~session() override;
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Spawns the reader, writer and watchdog on the session's executor.
  void start();
  // Server shutdown, on the executor: connection.close 320, then the usual close-ok wait.
  void close_for_shutdown();
  // Last resort, on the executor: the socket goes now (channels still get closed()).
  void abort();
  // Any thread.
  session_summary summary() const;

  // broker::connection_port
  void send(std::string frames) override;
  std::uint32_t frame_max() const override { return frame_max_; }
  std::uint64_t connection_id() const override { return id_; }
  net::any_io_executor executor() override { return executor_; }
  std::shared_ptr<bus::client> bus() override { return bus_; }
  const std::string& user() const override { return user_; }
  void close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                     wire::method_key offending) override;
  void close_connection(wire::reply_code code, std::string sentence, wire::method_key offending) override;
  bool backlogged() const override { return queued_bytes_ > options_.outbound_cap; }
  // The reader stops: output is backlogged, or the bus is behind this connection's publishes.
  bool reading_paused() const { return backlogged() || publishing_ > options_.publish_cap; }
  void when_drained(std::function<void()> resume) override;
  void publish_handed(std::size_t cost) override { publishing_ += cost; }
  void publish_answered(std::size_t cost) override;

 private:
  enum class phase {
    protocol_header,  // waiting for "AMQP 0 0 9 1"
    start_ok,
    signing_in,       // the bus is checking start-ok's credentials
    tune_ok,
    open,
    joining,          // the bus is checking that the user is of connection.open's vhost
    running,
    // The end, in order; phases only move forward (enter):
    closing,        // we sent connection.close: waiting for close-ok (or EOF)
    draining,       // input is dropped until EOF; our send side shuts once what is queued is out
    ended,          // no more input is handled; the writer flushes and the socket goes
    tls_ending,     // the close deadline passed under TLS: close_notify, then the socket goes
    socket_closed,
  };
  // The one transition function: a later phase only.
  void enter(phase next) {
    if (next > phase_) phase_ = next;
    std::lock_guard lock{summary_mutex_};
    summary_.running = phase_ == phase::running;
  }
  void count_channels();
  // The summary's fields that change after the handshake, under its lock.
  template <class Fn>
  void update_summary(Fn&& fn) {
    std::lock_guard lock{summary_mutex_};
    fn(summary_);
  }
  bool ending() const { return phase_ >= phase::closing; }

  // An open channel id's life; a slot is erased when the channel is closed both ways.
  enum class slot_state {
    open,
    closing,  // the broker's channel is closed (we sent channel.close, or the connection is going):
              // frames are ignored until close-ok
    crossed,  // closing, and the client's own channel.close crossed ours and was answered
  };
  struct channel_slot {
    std::unique_ptr<broker::channel> channel;
    slot_state state = slot_state::open;
    content_assembly content;
  };

  // coroutines
  awaitable<void> reader(std::shared_ptr<session> self);
  awaitable<void> read_loop();
  awaitable<bool> read_more();
  awaitable<void> wait_for_drain();
  awaitable<void> writer(std::shared_ptr<session> self);
  awaitable<void> watchdog(std::shared_ptr<session> self);
  void spawn(awaitable<void> coroutine, const char* what);

  // input
  void handle_buffered();
  void handle_protocol_header();
  void handle_frame(const wire::frame_view& f);
  void handle_while_closing(const wire::frame_view& f);
  void handle_channel_zero(const wire::frame_view& f);
  void handle_handshake_method(wire::method& m);
  void handle_channel_frame(const wire::frame_view& f);
  void handle_unopened_channel(const wire::frame_view& f);
  void handle_closing_channel(std::uint16_t id, channel_slot& slot, const wire::frame_view& f);
  void handle_channel_method(std::uint16_t id, channel_slot& slot, wire::method m);
  void handle_header(std::uint16_t id, channel_slot& slot, const wire::frame_view& f);
  void handle_body(std::uint16_t id, channel_slot& slot, const wire::frame_view& f);
  void hand_publish_to_broker(channel_slot& slot);  // its content is complete
  void open_channel(std::uint16_t id);
  void client_closed_channel(std::uint16_t id);
  // The one way out of slot_state::open: the broker's channel is told closed(), once.
  void close_broker_channel(channel_slot& slot);
  template <class Call> void call_broker(wire::method_key key, Call&& call);

  // handshake steps
  void on_start_ok(const wire::connection_start_ok& m);
  void on_tune_ok(const wire::connection_tune_ok& m);
  void on_open(const wire::connection_open& m);
  // Blocking bus work (signing in, joining a vhost) on the bus's pool, then `then(*this, result)`
  // here, unless the connection is closing by then.
  template <class Work, class Then>
  void off_the_loop(Work work, Then then);
  void signed_in(const std::string& mechanism, const bus::credentials& who,
                 bus::bus_result<std::shared_ptr<bus::client>> client);
  void on_update_secret(const wire::connection_update_secret& m);
  void opened(const vhost& v);
  // EXTERNAL: a verified client certificate names the user. Not under CLOUD_AMQP_AUTH=bus: the
  // bus checks credentials, and a certificate is none it can check through the adaptor.
  bool external_offered() const { return !options_.identities && !certificate_user_.empty(); }

  // output and ending
  template <class M> void send_method(std::uint16_t channel, const M& m);
  void enqueue(std::string frames);
  void connection_exception(wire::reply_code code, const std::string& sentence, wire::method_key key);
  void send_connection_close(wire::reply_code code, const std::string& sentence, wire::method_key key);
  void end();
  void closed_by_client();
  void release_channels();
  void teardown();  // the reader ended (once): channels released, the writer flushes and closes
  void close_socket();
  void wake(net::steady_timer& timer) { timer.cancel(); }
  void resume_producers();

  // watchdog
  bool check_deadlines(clock::time_point now);
  clock::time_point next_deadline(clock::time_point now) const;
  void warn(const std::string& message);
  std::string who() const;

  net::any_io_executor executor_;
  connection_stream stream_;
  const std::uint64_t id_;
  std::shared_ptr<const vhost_map> vhosts_;
  const vhost* vhost_ = nullptr;             // connection.open's (vhosts_ holds it)
  std::shared_ptr<broker::broker> broker_;  // its broker
  // The adaptor's own until the connection signs in (CLOUD_AMQP_AUTH=bus), then its user's: a
  // channel keeps the one it opened with.
  std::shared_ptr<bus::client> bus_;
  std::string user_;  // signed in as, or EXTERNAL's (empty: neither, or a token's user)
  std::string certificate_user_;  // the verified client certificate's common name
  const session_options options_;
  const broker::settings& settings_ = options_.settings;
  log_fn log_;
  std::shared_ptr<session_registry> registry_;
  mutable std::mutex summary_mutex_;
  session_summary summary_;
  std::string peer_;

  phase phase_ = phase::protocol_header;
  bool channels_released_ = false;  // channels closed and the broker told (release_channels)

  // negotiated (the offer until tune-ok)
  std::uint16_t channel_max_;
  std::uint32_t frame_max_;
  std::uint16_t heartbeat_seconds_ = 0;

  // input buffer: [in_start_, in_end_) holds octets not yet handled
  std::vector<std::uint8_t> in_;
  std::size_t in_start_ = 0;
  std::size_t in_end_ = 0;

  // output: encoded frames, written in order; queued_bytes_ is their total size
  std::deque<std::string> out_;
  std::vector<std::function<void()>> on_drained_;  // when_drained callers waiting for the writer
  std::size_t queued_bytes_ = 0;
  std::size_t publishing_ = 0;  // cost of this connection's publishes the bus has not answered
  bool reader_waiting_ = false;

  std::map<std::uint16_t, channel_slot> channels_;

  // deadlines (watchdog)
  clock::time_point handshake_deadline_;
  clock::time_point close_deadline_ = clock::time_point::max();
  clock::time_point last_read_;
  clock::time_point last_write_;

  net::steady_timer writer_wake_;
  net::steady_timer reader_wake_;
  net::steady_timer watchdog_timer_;
};

template <class M>
void session::send_method(std::uint16_t channel, const M& m) {
  std::string frame;
  wire::encode_method(frame, channel, m);
  enqueue(std::move(frame));
}

}  // namespace amqp::server
