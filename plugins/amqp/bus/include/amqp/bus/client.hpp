#pragma once
// The amqp plugin's only door to the bus. nats.c lives behind this header:
// no nats type appears here. nats.c callbacks do bookkeeping under the bus's own locks and post
// everything that reaches the caller to the caller's Asio executor (bus/README.md says which).
//
// Threading: every member of `client` is thread-safe. Calls documented "blocking" wait for a
// server round trip and must not run on an io thread: hand them to `run_blocking`, which runs
// them on a small worker pool owned by the client and posts the result back.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/bus/base64.hpp"
#include "amqp/bus/result.hpp"

namespace amqp::bus {

// The names the adaptor owns on the bus (HIP-1326, "Where it sits").
inline constexpr const char* stream_name = "AMQP";
inline constexpr const char* stream_subjects = "amqp.>";
inline constexpr const char* bucket_name = "amqp";
inline constexpr const char* props_header = "Amqp-Props";
// The subject a publish named, on a copy stored under a queue's own subject instead (a copy for a
// queue only a CC or BCC key reaches): deliveries show that subject's exchange and routing key.
inline constexpr const char* routed_as_header = "Amqp-Routed-As";
// Where delayed publishes wait as schedules (client::publish_delayed), and where each is stored
// when due, for the `~due` consumer to route; '~' is no word of a name, so no queue's subject is
// under either.
inline constexpr const char* delayed_subject_root = "amqp.~delayed";
inline constexpr const char* due_subject_root = "amqp.~due";
// The durable consumer (on every subject under due_subject_root) that every replica's router
// reads: a due message is routed once, by whichever replica it is delivered to.
inline constexpr const char* due_consumer = "~due";

// Who a client is on the bus (client::sign_in). An empty user with a password is a token (a JWT
// too, for an auth callout); user and password are the server's users.
struct credentials {
  std::string user;
  std::string password;
  bool operator==(const credentials&) const = default;
};

struct client_options {
  // One URL or a comma-separated list (a cluster): split and given to natsOptions_SetServers.
  std::string url;
  std::string creds_file;  // empty: no credentials
  // Set (client::sign_in): the client's user instead of the URL's or the creds file's.
  std::optional<credentials> who;
  // Bounds dialing, stream/bucket setup and the watch's initial replay.
  std::chrono::steady_clock::time_point deadline;
  // Stream AMQP and bucket amqp (queue consumers inherit the stream's: interest retention
  // requires it); an existing stream or bucket is changed to it. 0: the smaller of 3 and the
  // number of servers the bus names (its cluster).
  int replicas = 1;
  // The most queues (consumers of stream AMQP) the stream takes: its max_consumers is this plus
  // adaptor_consumers. nats-server 2.15 caps a stream that sets none at 1,000 consumers.
  std::uint64_t max_queues = 1'000'000;
  std::int64_t max_bytes = -1;          // stream AMQP size limit; -1 = unlimited
  std::int64_t max_age_seconds = 0;     // stream AMQP age limit; 0 = unlimited
  // Additions (defaults keep the brief's behaviour):
  std::string connection_name = "cloud-amqp";
  std::size_t max_publish_in_flight = 4096;  // un-acked publishes on the wire (see publish)
  std::chrono::milliseconds publish_timeout{30000};  // no pub-ack by then → done(error)
  // On a replicated stream (replicas > 1) a publish not answered within this, or answered "no
  // responders" (its stream electing a leader), is sent again until publish_timeout has passed
  // since the first send; each publish carries a Nats-Msg-Id, so the stream stores it once.
  std::chrono::milliseconds publish_attempt_timeout{2000};
  std::chrono::milliseconds request_timeout{5000};   // each blocking JetStream API call
  // Every queue consumer's ack wait: a delivery nobody holds any more (lost in flight to a
  // consumer leader that died, or held by a process that died) goes back to its queue after
  // this long. One this client holds is kept from it by a progress report every second, however
  // long it is held, so that no ack wait of 6 s or more (another replica's) runs out on it.
  std::chrono::seconds ack_wait{30};
  int worker_threads = 2;                             // the run_blocking pool
  // The bus started with this process (pubsub's embedded server): deliveries still awaiting an
  // ack at boot belong to sessions that died with the previous process, so they are handed back
  // (NAK) now instead of after the ack wait. Never set for a shared bus: live
  // replicas hold those.
  bool reclaim_unacked = false;
};

// A stream queue (x-queue-type stream) keeps what its queue consumer on stream AMQP takes in a
// JetStream stream of its own (limits retention: nothing leaves when read), named from the queue's
// consumer name; its subject is outside stream AMQP's `amqp.>`.
inline constexpr const char* queue_stream_prefix = "AMQP_STREAM_";
inline constexpr const char* queue_stream_subject_root = "amqp-stream";
inline std::string queue_stream_name(std::string_view queue) { return queue_stream_prefix + std::string(queue); }
inline std::string queue_stream_subject(std::string_view queue) {
  return std::string(queue_stream_subject_root) + "." + std::string(queue);
}
// What a stream queue's stream keeps: x-max-age in seconds (0: no bound), x-max-length-bytes (-1:
// no bound). The stream drops its oldest messages beyond either.
struct stream_limits {
  std::int64_t max_age_seconds = 0;
  std::int64_t max_bytes = -1;
};
struct stream_state {
  std::uint64_t messages = 0;
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
};
// Where a stream queue's reader starts (x-stream-offset): next (what is stored after it starts),
// first kept, last stored, a stream sequence (1 for the first), or the first stored at or after a
// time.
struct stream_start {
  enum class from { next, first, last, sequence, time };
  from kind = from::next;
  std::uint64_t sequence = 1;
  std::chrono::system_clock::time_point time{};
};

// The consumers of stream AMQP that are not queues, which its max_consumers leaves room for: each
// bus client's count probe (the adaptor's own, and each signed-in user's), the delayed holder
// and due_consumer.
inline constexpr std::uint64_t adaptor_consumers = 1'000;

// How a queue's consumers share its messages. single_active: RabbitMQ's single active consumer,
// as JetStream's pinned priority group: the server
// gives the queue's messages to one puller at a time, the one it pinned; the others wait until
// that puller stops (which unpins it) or stops renewing its pin (pin_timeout).
enum class queue_sharing { all_consumers, single_active };
// RabbitMQ's consumer priorities (basic.consume's x-priority) an all_consumers queue's pullers can
// carry. The bus serves a queue's waiting pull requests by ten levels (its consumer's prioritized
// group, lowest level first), so ten priorities: a puller of a higher one is served while it asks,
// a lower one only while no higher one asks, equal ones in turn.
inline constexpr int lowest_consumer_priority = 0;
inline constexpr int highest_consumer_priority = 9;
// A pinned puller that stopped asking (its process died, its bus link broke) loses the queue
// after this long; a live one renews its pin well within it.
inline constexpr std::chrono::seconds pin_timeout{15};

struct kv_entry {
  std::string value;
  std::uint64_t revision = 0;
};

struct kv_keyed_entry {
  std::string key;
  kv_entry entry;
};

struct queue_info {
  std::uint64_t num_pending = 0;      // stored, matching, never delivered
  std::uint64_t num_ack_pending = 0;  // delivered and not acked, requeued ones included
  std::uint64_t num_waiting = 0;      // outstanding pull requests
  std::uint64_t held_here = 0;        // of num_ack_pending: received by this client, not settled
  std::uint64_t delivered_consumer_seq = 0;
  std::uint64_t delivered_stream_seq = 0;  // the consumer has passed every message up to it
  std::uint64_t ack_floor_stream_seq = 0;  // every message up to it was delivered and acked
  // When the consumer last did something, by the server's clock (ms since the epoch): the latest
  // of its creation, its last delivery and its last ack.
  std::uint64_t last_active_ms = 0;
  std::vector<std::string> filters{};  // the consumer's filter_subjects, sorted
  // AMQP's message count: never delivered, or requeued and not delivered again. Deliveries other
  // replicas' clients hold unsettled count here too (only this client's are known).
  std::uint64_t ready() const { return num_pending + requeued(); }
  std::uint64_t requeued() const { return num_ack_pending > held_here ? num_ack_pending - held_here : 0; }
};

struct stored_message {
  std::uint64_t seq = 0;
  std::string subject;
};

struct delivery {
  std::string subject;      // the subject the message was published on
  std::string routed_as;    // Amqp-Routed-As: the subject its publish named, when it differs
  // The subject whose exchange and routing key a client is shown.
  const std::string& shown_subject() const { return routed_as.empty() ? subject : routed_as; }
  std::string amqp_props;   // Amqp-Props header, base64-decoded (empty if absent or invalid)
  std::string body;
  std::string reply;        // $JS.ACK... : pass to ack/nak/term
  std::uint64_t stream_seq = 0;
  std::uint64_t delivered = 0;  // delivery count, 1 = first delivery
  std::uint64_t pending = 0;    // messages left for this consumer after this one
  std::uint64_t stored_ns = 0;  // when the stream stored it (the server's clock, ns since the epoch)
};

// Why a pull request ended before it was filled. The caller decides whether to ask again.
enum class pull_status {
  no_messages,       // 404: nothing pending right now (no_wait)
  request_expired,   // 408: the request's `expires` ran out, or (no_wait) other requests claim what is pending
  consumer_gone,     // 409 consumer deleted / leadership change, or 503: ask again shortly
  exceeded_limits,   // 409 exceeded MaxWaiting / MaxRequestBatch: ask for fewer
  bytes_reached,     // 409 the next message would pass the request's byte bound: ask again
  lost,              // no answer will come (the bus connection was lost, or the server never answered)
  pin_lost,          // 423 (single_active): the server pinned another puller; ask again to wait in line
  denied,            // the bus does not let this client's user pull from the queue (description says so)
  other,
};
struct pull_event {
  pull_status status = pull_status::other;
  int code = 0;               // the NATS status code (404, 408, 409, ...); 0 when the client decided
  std::string description;    // the server's text, or the client's
  std::uint32_t unfilled = 0;  // messages the ended request asked for that will not come
};

// RAII handle on the topology watch: destroying it (or stop()) ends delivery of changes;
// after stop() returns no on_change starts.
class topology_watch {
 public:
  struct state;
  topology_watch() = default;
  explicit topology_watch(std::shared_ptr<state> s) : state_(std::move(s)) {}
  topology_watch(topology_watch&&) noexcept = default;
  topology_watch& operator=(topology_watch&& other) noexcept;
  topology_watch(const topology_watch&) = delete;
  topology_watch& operator=(const topology_watch&) = delete;
  ~topology_watch();
  void stop();

 private:
  std::shared_ptr<state> state_;
};

// Pull requests on one queue, without a thread of their own: they name the puller's own inbox,
// whose subscription nats.c's shared delivery pool serves; deliveries and events are posted to
// the executor in arrival order. Every member is called on that executor, which must be serial
// (a strand, or a one-thread io_context). A puller is used either for waiting requests (a
// consumer) or for no-wait requests of one message, one at a time (basic.get).
class puller {
 public:
  virtual ~puller() = default;
  // Asks for up to `batch` more messages, the request waiting at most `expires` on the server.
  // expires = 0 is "no wait", for one message: the answer comes at once, a message or an event
  // (404 no_messages, or 408 when other requests claim what is pending). Any number of waiting
  // requests may be outstanding; what they leave unfilled is reported by on_event (`unfilled`).
  // Requests are sent once the queue's NAKs are applied (client::nak), so a requeued message is
  // not overtaken by a later one.
  virtual void request(std::uint32_t batch, std::chrono::milliseconds expires) = 0;
  // Messages asked for that have neither arrived nor been reported unfilled.
  virtual std::uint32_t asked() const = 0;
  // The most messages worth having asked for at once: as many of the largest this puller has
  // seen lately as fit in half a request's byte bound (none seen yet: no bound). The server
  // closes a connection whose unsent deliveries pass its max_pending (64 MiB by default), and
  // every request is also bounded in bytes on the server (client::request_max_bytes).
  virtual std::uint32_t window_in_bytes() const = 0;
  // Ends every outstanding request at once: the server loses interest in the inbox (there is no
  // other way to cancel a pull). What it sent before that still arrives through on_delivery;
  // then on_stopped runs once, and no callback after it. Idempotent. A puller destroyed without
  // it does the same, and what arrives then goes back to the queue.
  virtual void stop() = 0;
  virtual const std::string& queue() const = 0;
};

// A subscription to a plain bus subject (no stream behind it); unsubscribed when the last
// reference goes. Its messages are handed over once: nothing is stored, nothing is settled.
class direct_subscription {
 public:
  virtual ~direct_subscription() = default;
};

struct puller_callbacks {
  std::function<void(delivery)> on_delivery;
  std::function<void(pull_event)> on_event;
  std::function<void()> on_stopped;
};

class client : public std::enable_shared_from_this<client> {
 public:
  using on_change_fn = std::function<void(std::string key, std::optional<std::string> value,
                                          std::uint64_t revision)>;

  // The mount steps, in order, each failing with a message naming the step:
  //   "dial <url>: …", "stream AMQP: …", "bucket amqp: …", "reclaim unacknowledged deliveries: …".
  // A pre-existing AMQP stream whose subjects or retention differ is refused, never changed;
  // one with another replica count is changed, or refused when the bus cannot change it.
  static bus_result<std::shared_ptr<client>> open(const client_options& options);

  // Blocking. A client of the same bus whose every publish, consumer operation and bucket write
  // is made as `who`, so that the server's users, accounts and subject permissions decide what
  // it may do; it works on a stream once it joined its service (join). Kind denied when the bus
  // refuses the credentials, or the user may not receive its answers (`_INBOX.>`).
  virtual bus_result<std::shared_ptr<client>> sign_in(const credentials& who,
                                                      std::chrono::steady_clock::time_point deadline) = 0;
  // Blocking. A signed-in client takes `service`'s stream and bucket: kind denied
  // when its user is not of `service`'s NATS account (a virtual host). Idempotent.
  virtual bus_status join(const client& service) = 0;
  // Not blocking. Whether this client's user may publish to `subject`, decided as the server
  // decides it, from the user's publish permissions (its $SYS.REQ.USER.INFO answer, asked at
  // sign_in, again on reconnection or a permissions violation, and when older than 10 s, since a
  // reload changes them silently). For a subject the client names without publishing on it (an
  // exchange's, whose messages are stored under their queues' subjects). Kind denied, worded as
  // the server's own refusal; kind denied too when the server would not say what the user may
  // publish. The adaptor's own client may publish everything.
  virtual bus_status may_publish(std::string_view subject) = 0;

  virtual ~client() = default;
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  std::int64_t max_payload() const;  // the server's INFO max_payload
  // What a waiting pull request may bring at most, in bytes: room for the largest message the
  // server takes, and for two such requests within the server's default max_pending.
  std::int64_t request_max_bytes() const;
  int replicas() const;              // as decided at open (client_options::replicas)

  // ---- topology (KV bucket amqp) -------------------------------------------------------
  // Replays the bucket's current entries SYNCHRONOUSLY (on_change runs on the calling thread
  // for each, before this returns; bounded by `deadline`, default options.deadline), then
  // posts later changes to `ex`. Delete/purge markers arrive as value = nullopt.
  virtual bus_result<topology_watch> watch_topology(
      boost::asio::any_io_executor ex, on_change_fn on_change,
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) = 0;
  // Blocking. The bucket's live keys as they are now (JetStream's last value per key), read on
  // the calling thread within `deadline`; deleted keys are absent. No watch outlives the call.
  virtual bus_result<std::vector<kv_keyed_entry>> kv_snapshot(std::chrono::steady_clock::time_point deadline) = 0;
  // Blocking. Not found → kind not_found. Create on an existing key → kind conflict.
  // Update with a stale revision → kind conflict (re-read, re-apply, retry).
  virtual bus_result<kv_entry> kv_get(const std::string& key) = 0;
  virtual bus_result<std::uint64_t> kv_create(const std::string& key, const std::string& value) = 0;
  virtual bus_result<std::uint64_t> kv_update(const std::string& key, const std::string& value,
                                              std::uint64_t expected_revision) = 0;
  // Blocking. Writes whatever the key holds now (no revision check).
  virtual bus_result<std::uint64_t> kv_put(const std::string& key, const std::string& value) = 0;
  virtual bus_status kv_delete(const std::string& key) = 0;

  // ---- queues (blocking) ---------------------------------------------------------------
  // A queue is named here by its durable consumer's name (one subject token of at most 255
  // characters; the broker spells it from the AMQP name with routing::consumer_name).
  // Create or update in place the durable pull consumer `queue` on stream AMQP (DeliverNew,
  // AckExplicit, AckWait options.ack_wait, MaxAckPending unbounded) with `filters` as its filter_subjects:
  // normalized by the caller (subsumed, deduplicated, sorted), at least one. Fails with kind
  // conflict when the server's returned config does not carry exactly them (another writer's
  // update came in between: read the bindings again and retry).
  // A single_active queue's consumer carries the pinned group, any other the prioritized one
  // (consumer priorities); an existing consumer without it is given it.
  virtual bus_status ensure_queue_consumer(const std::string& queue, const std::vector<std::string>& filters,
                                           queue_sharing sharing = queue_sharing::all_consumers) = 0;
  virtual bus_status delete_queue_consumer(const std::string& queue) = 0;  // not found is ok
  // Blocking. The consumer names of the queues whose consumer is not as ensure_queue_consumer makes
  // it now: another ack wait than options.ack_wait (made before it was set, or by a replica set
  // otherwise), or no priority group (made before consumer priorities). The caller converges each
  // (ensure_queue_consumer with the queue's own filters and sharing).
  virtual bus_result<std::vector<std::string>> queues_to_converge() = 0;
  // Blocking: every queue consumer's filter_subjects (sorted), by consumer name, a page of 256
  // consumers a request. A release before #55's step 3 gave a queue's consumer its bindings'
  // filters besides its own subject: the broker keeps those until what they hold is settled.
  virtual bus_result<std::map<std::string, std::vector<std::string>>> queue_consumer_filters() = 0;
  // The consumer's counts once the server has applied every settlement this client sent for
  // the queue before the call (acks and pulls travel separate server queues), and
  // counted every publish this client had confirmed (count_publishes).
  virtual bus_result<bus::queue_info> queue_info(const std::string& queue) = 0;
  // The consumer's counts as the server has them at this instant, without waiting for this
  // client's settlements and confirmed publishes to be counted: one round trip, and may lag.
  virtual bus_result<bus::queue_info> peek_queue(const std::string& queue) = 0;
  // Blocking: every queue's consumer's counts as the server has them, by consumer name, a page of
  // 256 consumers a request (what an operator lists; as peek_queue, they may lag).
  virtual bus_result<std::map<std::string, bus::queue_info>> peek_all_queues() = 0;
  // Not blocking: by consumer name, how many deliveries this client holds unsettled now (each
  // count's held_here, without asking the server); queues it holds none of are absent.
  virtual std::map<std::string, std::uint64_t> holdings() const = 0;
  // The bus confirms a publish before its queues' consumers count it, so a count or a no-wait
  // pull asked right after a confirm could miss the message. True when a publish was confirmed
  // since the last count_publishes; count_publishes (blocking) returns once all are counted.
  virtual bool publishes_uncounted() const = 0;
  virtual bus_status count_publishes() = 0;
  // Drops this queue's messages (the stream is shared): the durable is deleted and recreated
  // with the same filters. Messages delivered but not yet acked are dropped too (their later
  // ack is a no-op). Count first (queue_info) to say how many went.
  virtual bus_status purge_queue(const std::string& queue, const std::vector<std::string>& filters,
                                 queue_sharing sharing = queue_sharing::all_consumers) = 0;
  // Drops the stream's messages on `subject`, whoever holds them. For a subject only one queue's
  // filters match, this is what deleting that queue's consumer drops, but in time linear in the
  // messages: a consumer's delete checks each message it leaves against every other consumer.
  virtual bus_status purge_subject(const std::string& subject) = 0;
  // Drops the stream's messages on `subject` stored below sequence `below`: what a queue's
  // consumer has settled up to its ack floor, under limits retention the adaptor's to remove.
  virtual bus_status purge_subject_below(const std::string& subject, std::uint64_t below) = 0;
  // Blocking. Stream AMQP's retention becomes limits where a store made before it is interest
  // (docs/DESIGN.md, "Retention"): true once it is limits.
  virtual bus_result<bool> use_limits_retention() = 0;
  // Blocking. Each message schedule stored below delayed_subject_root whose target `retarget` names
  // anew (nullopt: kept as it is) is stored again on its own subject with that target, its time,
  // properties and body kept: a schedule replaces the one on its subject. The count stored again.
  virtual bus_result<std::size_t> retarget_schedules(
      const std::function<std::optional<std::string>(std::string_view target)>& retarget) = 0;
  // Whether stream AMQP has limits retention, as last read or made: what a queue is sent then
  // waits on its subject whether or not it has a consumer, so a queue gets one only once it is read.
  virtual bool retains_by_limits() const = 0;
  // Blocking: how many messages the stream holds on each subject matching `filter` (STREAM.INFO's
  // subjects_filter, up to 100,000 subjects a request); subjects holding none are absent. A queue
  // without a consumer holds what its subject holds, every message ready.
  virtual bus_result<std::map<std::string, std::uint64_t>> stored_per_subject(const std::string& filter) = 0;
  // The stream's last sequence: every message stored before the call has one at most this.
  virtual bus_result<std::uint64_t> last_sequence() = 0;
  // The first message stored at or after `from` whose subject matches one of `filters`;
  // nullopt when there is none.
  virtual bus_result<std::optional<stored_message>> next_message(std::uint64_t from,
                                                                 const std::vector<std::string>& filters) = 0;
  // The message stored at `seq` in full: subject, properties, body, stream_seq and stored_ns
  // (reply empty, delivered 0). Kind not_found when the stream holds none there.
  virtual bus_result<delivery> read_message(std::uint64_t seq) = 0;

  // ---- publishing (non-blocking, pipelined) ---------------------------------------------
  // `done` is posted to `ex` exactly once: ok = stored in stream AMQP; error = the bus's
  // refusal (e.g. no stream matches, max payload, timeout). Publishes beyond
  // max_publish_in_flight wait in the client; the caller bounds memory by watching
  // publish_backlog() (e.g. stop reading its socket above a threshold). `routed_as`, when not
  // empty, rides in routed_as_header (delivery::routed_as).
  virtual void publish(std::string subject, std::string amqp_props_b64, std::string body, std::string routed_as,
                       boost::asio::any_io_executor ex, std::function<void(bus_status)> done) = 0;
  // publish with Nats-Msg-Id `msg_id`: stored once within the stream's duplicate window, however
  // often it is sent, by this or another process (a copy made again after a crash).
  virtual void publish_identified(std::string subject, std::string msg_id, std::string amqp_props_b64,
                                  std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                                  std::function<void(bus_status)> done) = 0;
  // A publish the stream stores now and delivers to `subject` at `at`, as nats-server's message
  // schedules do: it waits under `schedule_prefix` (below delayed_subject_root) plus a word of its
  // own; at `at` the server stores a copy on `subject` (below due_subject_root, for the `~due`
  // consumer) and drops the schedule. `done` as publish's: ok = the schedule is stored (and
  // replicated).
  virtual void publish_delayed(std::string subject, std::string schedule_prefix,
                               std::chrono::system_clock::time_point at, std::string amqp_props_b64,
                               std::string body, boost::asio::any_io_executor ex,
                               std::function<void(bus_status)> done) = 0;
  virtual std::size_t publish_backlog() const = 0;  // in flight + waiting
  // The blocking JetStream API and bucket requests this client made so far (an operator's metric).
  virtual std::uint64_t requests_made() const = 0;

  // ---- pulling --------------------------------------------------------------------------
  // `sharing` is the queue's (its consumer's priority group). A single_active puller's requests
  // are served only while the server pins it; a no-wait request there waits a moment and ends
  // empty-handed while another puller holds the pin, and one that took the pin for its message
  // gives it back at once. An all_consumers puller's waiting requests carry `priority`
  // (lowest_consumer_priority to highest_consumer_priority): the queue's messages go to the
  // highest priority that asks. A no-wait request (one message: basic.get, the expiry sweeper's
  // and a length limit's pulls, which want the queue's head) is served with the highest priority.
  virtual std::shared_ptr<puller> make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                              puller_callbacks callbacks,
                                              queue_sharing sharing = queue_sharing::all_consumers,
                                              int priority = lowest_consumer_priority) = 0;
  // ---- stream queues ---------------------------------------------------------------------
  // Blocking. Creates the queue's stream (queue_stream_name of its consumer name), or updates its
  // limits in place; file storage, the client's replicas.
  virtual bus_status ensure_queue_stream(const std::string& queue, const stream_limits& limits) = 0;
  virtual bus_status delete_queue_stream(const std::string& queue) = 0;  // not found is ok
  // Blocking. What the queue's stream holds now.
  virtual bus_result<stream_state> queue_stream_state(const std::string& queue) = 0;
  // A message for the queue, stored in its stream; with a `msg_id`, as its Nats-Msg-Id (stored
  // once within the stream's duplicate window, so a copy made again after a crash is not kept
  // twice); `done` as publish's.
  virtual void publish_to_queue_stream(const std::string& queue, std::string msg_id, std::string amqp_props_b64,
                                       std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                                       std::function<void(bus_status)> done) = 0;
  // Blocking. A reader of the queue's stream: a consumer of its own there (ack policy none, gone
  // after an hour without pull requests should its process die), starting at `start`; its name.
  virtual bus_result<std::string> create_stream_reader(const std::string& queue, const stream_start& start) = 0;
  virtual bus_status delete_stream_reader(const std::string& queue, const std::string& reader) = 0;
  // Pull requests on a reader, as make_puller's; its deliveries are never settled (their reply
  // only carries the stream sequence), and none is handed back.
  virtual std::shared_ptr<puller> make_stream_puller(const std::string& queue, const std::string& reader,
                                                     boost::asio::any_io_executor ex, puller_callbacks callbacks) = 0;

  // Fire-and-forget settlement of a delivery (its `reply`). Non-blocking. A nak holds back the
  // queue's later pulls until the server has applied it (2 s at the most).
  virtual void ack(const std::string& reply) = 0;
  virtual void nak(const std::string& reply) = 0;
  virtual void term(const std::string& reply) = 0;
  // The consumers this client acked or termed a delivery of since the last call: their settled
  // messages are still stored until the adaptor removes them (purge_subject_below).
  virtual std::vector<std::string> take_settled() = 0;
  // Hands back a delivery no AMQP client was shown (its consumer, channel or get was gone), as
  // nak does; its next delivery through this client does not count it (delivered), as if it
  // had stayed in the queue.
  virtual void return_unseen(const std::string& reply) { nak(reply); }

  // ---- direct messages (outside the stream: RabbitMQ's direct reply-to) --------------------
  // Subscribes `subject`; each message is posted to `ex` as a delivery whose `reply` is empty
  // and `delivered` 1, and its receipt is confirmed to the publisher (publish_direct).
  virtual std::shared_ptr<direct_subscription> subscribe_direct(const std::string& subject,
                                                                boost::asio::any_io_executor ex,
                                                                std::function<void(delivery)> on_message) = 0;
  // Publishes to `subject` without storing it; `done(received)` is posted to `ex` once: true when
  // a subscriber confirmed receipt (or one existed but did not answer within the request
  // timeout), false when nobody subscribes the subject or the bus refused the publish.
  virtual void publish_direct(const std::string& subject, std::string amqp_props_b64, std::string body,
                              boost::asio::any_io_executor ex, std::function<void(bool received)> done) = 0;

  // ---- blocking work off the io threads ----------------------------------------------------
  // Runs `work()` on the client's worker pool and posts `done(result)` to completion_ex.
  template <class Work, class Done>
  void run_blocking(boost::asio::any_io_executor completion_ex, Work work, Done done) {
    boost::asio::post(worker_executor(), [self = shared_from_this(), completion_ex,
                                          work = std::move(work), done = std::move(done)]() mutable {
      auto r = work();
      boost::asio::post(completion_ex, [r = std::move(r), done = std::move(done)]() mutable {
        done(std::move(r));
      });
    });
  }
  virtual boost::asio::any_io_executor worker_executor() = 0;

  // Idempotent; flushes pending publishes/acks (bounded), ends the watch and pullers, fails
  // outstanding publishes with "bus closed". nats.c's library-global state (nats_Open) is
  // never closed: the host may unload the plugin while another user of libnats remains, so
  // instead libnats is pinned in memory (RTLD_NODELETE) and its threads live until exit.
  virtual void close() = 0;

  // Closes `bus` and lets go of it, then waits (until `deadline`) for the work still running on
  // its worker pool, which holds it, to end: after this no run_blocking completion is posted to
  // an executor of the caller's, which may then be destroyed.
  static void close_and_release(std::shared_ptr<client>& bus, std::chrono::steady_clock::time_point deadline);

 protected:
  client() = default;
  std::int64_t max_payload_ = 0;
  int replicas_ = 1;
};

// Blocking: a queue's counts, its consumer's (queue_info, or peek_queue when `peek`) once it has
// one; before its first read it has none under limits retention, and holds what its subject holds,
// every message ready.
bus_result<queue_info> queue_counts(client& bus, const std::string& consumer, const std::string& subject, bool peek);

}  // namespace amqp::bus
