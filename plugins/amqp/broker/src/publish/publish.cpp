// basic.publish and publisher confirms (design at the top of basic.hpp).
#include <boost/asio/post.hpp>
#include <algorithm>
#include <memory>
#include <optional>
#include <variant>

#include "amqp/bus/base64.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
#include "channel/basic.hpp"
#include "housekeeping/dead_letter.hpp"
#include "publish/delayed_delivery.hpp"
#include "publish/publish_permission.hpp"
#include "publish/route.hpp"
#include "deliver/delivery.hpp"
#include "channel/handler_support.hpp"
#include "housekeeping/length_limit.hpp"
#include "publish/sender_selected.hpp"
#include "topology/topology_store.hpp"

namespace amqp::broker {
namespace {

constexpr auto during = wire::basic_publish::key;
// What a publish waiting for the bus holds besides its content (bookkeeping, callbacks).
constexpr std::size_t publish_overhead = 256;

// A publish's fate, for its confirm; a stored one counts as confirmed.
std::vector<publish_confirms::confirm> record_outcome(basic_state& s, std::uint64_t seq, publish_confirms::outcome o) {
  if (o == publish_confirms::outcome::ack) broker::count(s.ctx.state().message_counters().confirmed);
  return s.confirms.record(seq, o);
}

void send_confirms(channel_context& ctx, const std::vector<publish_confirms::confirm>& frames) {
  for (const auto& f : frames) {
    if (f.kind == publish_confirms::outcome::ack) {
      ctx.reply(wire::basic_ack{f.delivery_tag, f.multiple});
    } else {
      ctx.reply(wire::basic_nack{f.delivery_tag, f.multiple, false});
    }
  }
}

// The bus's answers arrive one at a time, each posted to the channel's executor, but in
// bursts: stage what they make sendable and send it once the answers already queued behind
// this one have been recorded too, as a few `multiple` confirms (publish_confirms.hpp).
void confirm_soon(basic_state& s, const std::vector<publish_confirms::confirm>& frames) {
  if (!s.confirms.stage(frames)) return;
  boost::asio::post(s.ctx.executor(), [&s, weak = s.ctx.weak_from_this()] {
    auto alive = weak.lock();
    if (!alive || !s.ctx.is_open()) return;  // nobody to tell any more
    send_confirms(s.ctx, s.confirms.take_staged());
  });
}

// Sends at once, after anything still staged, so that confirms keep their order.
void confirm_now(basic_state& s, const std::vector<publish_confirms::confirm>& frames) {
  s.confirms.stage(frames);
  send_confirms(s.ctx, s.confirms.take_staged());
}

// basic.return 312 NO_ROUTE with the publisher's own properties and body, as one unit.
void return_unroutable(channel_context& ctx, const wire::basic_publish& m,
                       const std::string& property_octets, const std::string& body) {
  broker::count(ctx.state().message_counters().unroutable_returned);
  std::string out;
  encode_delivery(out, ctx.id(),
                  wire::basic_return_{static_cast<std::uint16_t>(wire::reply_code::no_route),
                                      "NO_ROUTE", m.exchange, m.routing_key},
                  property_octets, body, ctx.frame_max());
  ctx.send(std::move(out));
}

// The bus answered one publish of this channel.
void publish_done(basic_state& s, std::uint64_t seq, std::size_t cost, const bus::bus_status& stored,
                  const std::string& subject) {
  if (s.publishes_in_flight > 0) --s.publishes_in_flight;
  if (!s.ctx.is_closed()) {  // else closed() released it already
    s.publish_cost_in_flight -= cost;
    s.ctx.port().publish_answered(cost);
  }
  if (s.publishes_in_flight == 0 && !s.after_publishes.empty()) {
    auto waiting = std::move(s.after_publishes);
    s.after_publishes.clear();
    for (auto& work : waiting) work();
  }
  if (!s.ctx.is_open()) return;
  // A refusal of the user closes the channel, as RabbitMQ refuses a publish to an exchange the
  // user may not write; under confirms anything else is a nack.
  if (seq != 0 && (stored || stored.error().kind != bus::bus_errc::denied)) {
    // A nack tells the client only that the message is not stored; the operator learns why.
    if (!stored) s.ctx.state().report_nack(subject, stored.error().text);
    confirm_soon(s, record_outcome(s, seq, stored ? publish_confirms::outcome::ack
                                                  : publish_confirms::outcome::nack));
    return;
  }
  if (!stored) {
    // No confirms were asked for, but a publisher must not believe a dropped message stored.
    s.ctx.refuse(bus_failure_reply(stored.error().kind, "the bus did not store the message published to " + subject,
                                   stored.error().text,
                                   "publish it again, and use confirm.select to learn each message's fate"),
                 during);
  }
}

// A publish is handed to the bus: it counts in flight (publish_done counts it out) and bounds the
// connection's reading. Returns its cost, which publish_done is given back; each copy the bus
// holds costs its content.
std::size_t count_in_flight(basic_state& s, const std::string& property_octets, const std::string& body,
                            std::size_t copies = 1) {
  const std::size_t cost = (property_octets.size() + body.size()) * std::max<std::size_t>(copies, 1) + publish_overhead;
  ++s.publishes_in_flight;
  s.publish_cost_in_flight += cost;
  s.ctx.port().publish_handed(cost);
  return cost;
}

// RabbitMQ refuses a publish whose `expiration` is not a count of milliseconds (406); one that
// is expires in the queue (checked at delivery: deliver/consume.cpp, unseen).
bool valid_expiration(channel_context& ctx, const std::string& property_octets) {
  auto ms = wire::expiration_of(property_octets);  // the session decoded them already
  if (ms) return true;
  ctx.fail(ms.error().code, ms.error().text, during);
  return false;
}

// As RabbitMQ validates user_id: a publisher may not claim to be someone else (406). Only an
// authenticated connection has a user to compare with.
bool valid_user_id(channel_context& ctx, const std::string& property_octets) {
  const auto& user = ctx.port().user();
  if (user.empty()) return true;
  auto claimed = wire::user_id_of(property_octets);
  if (!claimed) {
    ctx.fail(claimed.error().code, claimed.error().text, during);
    return false;
  }
  if (!*claimed || **claimed == user) return true;
  ctx.fail(wire::reply_code::precondition_failed,
           "user_id property set to '" + **claimed + "' but authenticated user was '" + user +
               "'; publish with the connection's own user, or without user_id",
           during);
  return false;
}

// A reply_to of amq.rabbitmq.reply-to becomes this channel's reply address (RabbitMQ's direct
// reply-to). False, with the channel failed, when the channel has no reply consumer.
bool rewrite_direct_reply_to(basic_state& s, std::string& property_octets) {
  if (property_octets.find(routing::direct_reply_queue) == std::string::npos) return true;  // cheap test first
  auto props = wire::decode_properties(
      {reinterpret_cast<const std::uint8_t*>(property_octets.data()), property_octets.size()});
  if (!props || props->reply_to != routing::direct_reply_queue) return true;
  if (!s.reply) {
    s.ctx.fail(wire::reply_code::precondition_failed,
               "fast reply consumer does not exist; consume amq.rabbitmq.reply-to with no-ack on this "
               "channel before publishing with it as reply_to",
               during);
    return false;
  }
  props->reply_to = routing::direct_reply_address(s.reply->token);
  property_octets = wire::encode_properties(*props);
  return true;
}

// A publish to a reply address through the default exchange goes straight to the requester's
// bus subject, stored nowhere; mandatory returns it when no requester subscribes there any more.
void publish_direct_reply(basic_state& s, const wire::basic_publish& m, std::string property_octets,
                          std::string body, std::uint64_t seq) {
  auto& chan = s.ctx;
  auto subject = routing::direct_reply_subject(m.routing_key);
  if (!subject) {  // not an address this adaptor handed out: nobody can be there
    if (m.mandatory) return_unroutable(chan, m, property_octets, body);
    if (seq != 0) confirm_now(s, record_outcome(s, seq, publish_confirms::outcome::ack));
    return;
  }
  const std::size_t cost = count_in_flight(s, property_octets, body);
  std::optional<std::pair<std::string, std::string>> returnable;  // kept only to return it
  if (m.mandatory) returnable.emplace(property_octets, body);
  chan.bus().publish_direct(
      *subject, bus::base64_encode(property_octets), std::move(body), chan.executor(),
      [&s, weak = chan.weak_from_this(), m, seq, cost, returnable = std::move(returnable), subj = *subject](bool received) {
        auto alive = weak.lock();
        if (!alive) return;
        if (!received && returnable && s.ctx.is_open())
          return_unroutable(s.ctx, m, returnable->first, returnable->second);
        publish_done(s, seq, cost, bus::bus_ok(), subj);
      });
}

// ---- publishes that reach length-limited queues (length_limit.hpp) ----------------------------
//
// Such a publish holds the channel's next method until it is decided: the counts it is judged by
// must include this channel's earlier publishes, and the next ones must see its effect.

struct limited_publish {
  wire::basic_publish method;
  std::string subject;  // what the publish named, for the operator's reports
  std::string property_octets;
  std::string body;
  std::uint64_t seq = 0;
  publish_plan plan;
};

const length_limit& limit_of(const limited_publish& p, const std::string& queue) {
  const auto& limits = p.plan.limits;
  return *std::find_if(limits.begin(), limits.end(), [&](const length_limit& l) { return l.queue == queue; });
}

std::vector<std::string> queues_with(const std::vector<length_limit>& limits, bool drop_head) {
  std::vector<std::string> out;
  for (const auto& l : limits)
    if ((l.overflow == routing::overflow_mode::drop_head) == drop_head) out.push_back(l.queue);
  return out;
}

// The ready count of each queue, from the bus; nullopt when the bus failed (the channel with it).
task<std::optional<std::vector<std::uint64_t>>> counted(basic_state& s, std::vector<std::string> queues,
                                                        bool for_dropping) {
  auto count = [bus = s.ctx.bus_ptr(), queues, for_dropping] {
    return ready_counts(*bus, queues, for_dropping);
  };
  auto counts = co_await s.ctx.on_bus(during, std::move(count));
  if (auto* f = std::get_if<bus::bus_error>(&counts)) {
    bus_failed(s.ctx, *f, during);
    co_return std::nullopt;
  }
  co_return std::get<std::vector<std::uint64_t>>(std::move(counts));
}

// Hands the copies for `queues` to the bus (counted in flight until publish_done) and resumes with
// the answer: ok once every copy is stored.
task<bus::bus_status> stored(basic_state& s, const limited_publish& p, std::vector<std::string> queues) {
  const std::size_t cost = count_in_flight(s, p.property_octets, p.body, queues.size());
  auto send = [&s, &p, queues = std::move(queues)](std::function<void(bus::bus_status)> done) {
    publish_copies(s.ctx.bus(), s.ctx.state().bus(), s.ctx.executor(), {queues, p.plan.streams, p.plan.routed_as},
                   bus::base64_encode(p.property_octets), p.body, std::move(done));
  };
  auto answer = co_await until_called<bus::bus_status>(s.ctx, std::move(send));
  publish_done(s, 0, cost, answer, p.subject);
  co_return answer;
}

// Every drop-head queue of `p` trimmed to its limit; false when the bus failed (the channel with it).
task<bool> trimmed(basic_state& s, const limited_publish& p) {
  const auto queues = queues_with(p.plan.limits, true);
  if (queues.empty()) co_return true;
  auto ready = co_await counted(s, queues, true);
  if (!ready) co_return false;
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const auto& limit = limit_of(p, queues[i]);
    const std::uint64_t excess = (*ready)[i] > limit.max_length ? (*ready)[i] - limit.max_length : 0;
    auto drop = [&s, queue = queues[i], excess](std::function<void()> done) {
      drop_heads(s.ctx.state(), s.ctx.executor(), queue, excess, std::move(done));
    };
    co_await until_called<>(s.ctx, std::move(drop));
  }
  co_return true;
}

// reject-publish: the full queues do not take it (reject-publish-dlx dead-letters it from them),
// every other queue the route reaches does, by its own name, and the publisher is nacked.
task<> reject(basic_state& s, std::shared_ptr<limited_publish> p, std::vector<std::string> full) {
  auto& b = s.ctx.state();
  for (const auto& q : full) {
    if (limit_of(*p, q).overflow != routing::overflow_mode::reject_publish_dlx) continue;
    bus::delivery never_stored;  // nothing to settle: its reply is empty
    never_stored.subject = p->subject;
    never_stored.amqp_props = p->property_octets;
    never_stored.body = p->body;
    give_up(b, s.ctx.executor(), q, death_reason::maxlen, std::move(never_stored));
  }
  std::vector<std::string> others;
  for (const auto& q : p->plan.queues)
    if (std::find(full.begin(), full.end(), q) == full.end()) others.push_back(q);
  const bool any = !others.empty();
  if (any) co_await stored(s, *p, std::move(others));
  // Once every other queue has its copy, the drop-head ones among them are trimmed as usual.
  if (any) {
    const bool trim_done = co_await trimmed(s, *p);
    if (!trim_done) co_return;
  }
  if (p->seq != 0) confirm_now(s, record_outcome(s, p->seq, publish_confirms::outcome::nack));
}

// Judged against the counts once this channel's earlier publishes are in them; it holds the
// channel's next method (its turn) until decided, so the next ones see its effect.
task<> publish_limited(basic_state& s, std::shared_ptr<limited_publish> p) {
  co_await publishes_answered(s.ctx);
  const auto judged = queues_with(p->plan.limits, false);
  if (!judged.empty()) {
    auto ready = co_await counted(s, judged, false);
    if (!ready) co_return;
    std::vector<std::string> full;
    for (std::size_t i = 0; i < judged.size(); ++i)
      if ((*ready)[i] >= limit_of(*p, judged[i]).max_length) full.push_back(judged[i]);
    if (!full.empty()) {
      co_await reject(s, p, std::move(full));
      co_return;
    }
  }
  // Confirmed once the drop-head queues it reached are trimmed.
  const std::size_t cost = count_in_flight(s, p->property_octets, p->body, p->plan.queues.size());
  auto send = [&s, p](std::function<void(bus::bus_status)> done) {
    publish_copies(s.ctx.bus(), s.ctx.state().bus(), s.ctx.executor(),
                   {p->plan.queues, p->plan.streams, p->plan.routed_as}, bus::base64_encode(p->property_octets), p->body, std::move(done));
  };
  auto answer = co_await until_called<bus::bus_status>(s.ctx, std::move(send));
  if (answer && !s.ctx.is_closed()) {
    const bool trim_done = co_await trimmed(s, *p);
    if (!trim_done) co_return;
  }
  publish_done(s, p->seq, cost, answer, p->subject);
}

}  // namespace

namespace {

struct publish_request {
  wire::basic_publish m;
  std::string property_octets;  // BCC taken out
  std::string body;
  // CC and BCC keys route too, so they are read before the mirror; a malformed header is refused
  // where RabbitMQ refuses it, after the exchange's own checks.
  wire::result<std::vector<std::string>> cc_keys;
};

const std::vector<std::string>& cc_keys_of(const publish_request& p) {
  static const std::vector<std::string> none;
  return p.cc_keys ? *p.cc_keys : none;
}

// The publish's plan, from one mirror read.
publish_plan plan_for(channel_context& ctx, const publish_request& p) {
  return plan_publish(ctx.state(), p.m.exchange, p.m.routing_key, cc_keys_of(p), p.property_octets);
}

// What the bus's answer to a publish handed to it does: the confirm (or the channel's failure).
std::function<void(bus::bus_status)> on_answer(basic_state& s, std::uint64_t seq, std::size_t cost,
                                               const std::string& subject) {
  return [st = &s, weak = s.ctx.weak_from_this(), seq, cost, subject](bus::bus_status stored) {
    auto alive = weak.lock();
    if (!alive) return;  // the channel and its state are gone: nobody to tell
    publish_done(*st, seq, cost, stored, subject);
  };
}

// The publish's copies handed to the bus, pipelined: it is confirmed once every copy is stored.
void store_copies(basic_state& s, publish_request p, const std::string& subject, const publish_plan& plan,
                  std::uint64_t seq) {
  auto& chan = s.ctx;
  const std::size_t cost = count_in_flight(s, p.property_octets, p.body, plan.queues.size());
  publish_copies(chan.bus(), chan.state().bus(), chan.executor(), {plan.queues, plan.streams, plan.routed_as},
                 bus::base64_encode(p.property_octets), std::move(p.body), on_answer(s, seq, cost, subject));
}

// A delayed-message exchange's publish (delayed_delivery.hpp): the stream stores it now, as a
// schedule, and the confirm says so; when its delay ends a router (due_router.hpp) routes it by the
// bindings of that moment, and tells the expiry sweeper. mandatory returns it at once, as the
// plugin does: nothing is routed at publish.
void store_delayed(basic_state& s, publish_request p, const std::string& subject, delayed_publish delayed,
                   std::uint64_t seq) {
  auto& chan = s.ctx;
  const auto& m = p.m;
  if (m.mandatory) return_unroutable(chan, m, p.property_octets, p.body);
  const std::size_t cost = count_in_flight(s, delayed.property_octets, p.body);
  const auto at = std::chrono::system_clock::now() + delayed.delay;
  chan.bus().publish_delayed(due_subject(subject), delayed_subject_prefix(m.exchange), at,
                             bus::base64_encode(delayed.property_octets), std::move(p.body), chan.executor(),
                             on_answer(s, seq, cost, subject));
}

// CC or BCC keys with what their copies cannot honour exactly: refused, naming the remedy.
bool sender_selection_refused(channel_context& chan, const wire::basic_publish& m, const publish_plan& plan,
                              bool has_subject, bool delayed) {
  std::string why;
  if (delayed) {
    why = "to a delayed-message exchange with an x-delay";
  } else if (routing::names_direct_reply(m.routing_key) && m.exchange.empty()) {
    why = "to a direct reply-to address";
  } else if (!has_subject) {
    why = "whose routing key has no subject";
  } else {
    if (plan.limits.empty()) return false;
    why = "that reaches a queue with x-max-length";
  }
  chan.fail(wire::reply_code::not_implemented,
            "the CC and BCC headers are not implemented on a publish " + why + "; publish once per routing key instead",
            during);
  return true;
}

// Stored nowhere, returned when mandatory; under confirms still acked (a return is not a
// failure to publish).
void not_routed(basic_state& s, const publish_request& p, std::uint64_t seq) {
  if (p.m.mandatory) return_unroutable(s.ctx, p.m, p.property_octets, p.body);
  if (seq != 0) confirm_now(s, record_outcome(s, seq, publish_confirms::outcome::ack));
}

void store_routed(basic_state& s, publish_request p, const std::string& subject, publish_plan plan, std::uint64_t seq,
                  turn publish_turn) {
  auto& chan = s.ctx;
  chan.state().expect_expiries(plan.expiries);
  if (!plan.limits.empty()) {
    auto limited = std::make_shared<limited_publish>(
        limited_publish{p.m, subject, std::move(p.property_octets), std::move(p.body), seq, std::move(plan)});
    return chan.spawn(during, publish_limited(s, std::move(limited)), std::move(publish_turn));
  }
  store_copies(s, std::move(p), subject, plan, seq);
}

// A publish through the default exchange to a queue the mirror lacks: it may be another replica's,
// its declaration still on its way here (the mirror's watch lags), so the bucket says, as for an
// exchange. A queue that does not exist takes nothing: the stream would keep it for nobody.
task<> publish_after_queue_lookup(basic_state& s, publish_request p, std::string subject, publish_plan plan,
                                  std::uint64_t seq, turn publish_turn) {
  auto key = routing::queue_key(*plan.unknown_queue);
  auto present = co_await entry_present(s.ctx, false, std::move(key), during);
  if (!present) co_return;  // the bus failed: the channel is closed
  if (*present) {
    if (auto again = plan_for(s.ctx, p); again.exchange && !again.unknown_queue) {
      plan = std::move(again);  // the bucket's entry reached the mirror: its limits and expiries too
    } else {
      plan.queues.insert(std::lower_bound(plan.queues.begin(), plan.queues.end(), *plan.unknown_queue),
                         *plan.unknown_queue);
    }
  }
  if (plan.queues.empty()) {
    not_routed(s, p, seq);
    co_return;
  }
  store_routed(s, std::move(p), subject, std::move(plan), seq, std::move(publish_turn));
}

// The publish, once its exchange is known to exist (in `plan`). It carries the turn only while a
// length limit is checked on the bus; once a publish is handed to the bus the turn ends (pipelined).
void publish_to(basic_state& s, publish_request p, publish_plan plan, turn publish_turn) {
  auto& chan = s.ctx;
  const auto& m = p.m;
  const auto& def = *plan.exchange;
  if (def.internal) {
    return chan.fail(wire::reply_code::access_refused,
                     "cannot publish to internal exchange " + quoted(m.exchange) + in_vhost(chan), during,
                     "publish to the exchange bound to it instead");
  }
  if (!valid_expiration(chan, p.property_octets) || !valid_user_id(chan, p.property_octets)) return;
  if (!p.cc_keys) return chan.refuse(p.cc_keys.error(), during);
  auto subject = routing::publish_subject(m.exchange, m.routing_key);
  std::optional<delayed_publish> delayed;
  if (def.delayed) {
    auto delay = read_delay(p.property_octets);
    if (!delay) return chan.refuse(delay.error(), during);
    delayed = std::move(*delay);
  }
  if (!p.cc_keys->empty() && sender_selection_refused(chan, m, plan, subject.ok(), delayed.has_value())) return;
  if (!rewrite_direct_reply_to(s, p.property_octets)) return;
  auto next_seq = [&] {
    if (chan.confirms && !s.confirms.enabled()) s.confirms.select();
    if (!s.confirms.enabled()) return std::uint64_t{0};
    broker::count(chan.state().message_counters().received_confirm);
    return s.confirms.next();
  };
  if (m.exchange.empty() && routing::names_direct_reply(m.routing_key)) {
    const std::uint64_t seq = next_seq();
    return publish_direct_reply(s, m, std::move(p.property_octets), std::move(p.body), seq);
  }
  const bool to_nothing =
      !subject && def.kind != routing::exchange_kind::fanout && routing::blank_publish_key(m.routing_key);
  if (!subject && !to_nothing) return chan.refuse(subject.error(), during);
  if (subject && publish_denied(chan, *subject)) return;
  const std::uint64_t seq = next_seq();
  if (delayed && subject) return store_delayed(s, std::move(p), *subject, std::move(*delayed), seq);
  if (to_nothing) return not_routed(s, p, seq);
  if (plan.unknown_queue) {
    return chan.spawn(during, publish_after_queue_lookup(s, std::move(p), *subject, std::move(plan), seq, publish_turn),
                      publish_turn);
  }
  if (plan.queues.empty()) return not_routed(s, p, seq);
  store_routed(s, std::move(p), *subject, std::move(plan), seq, std::move(publish_turn));
}

// No exchange of that name, as the bucket says: the publish is refused.
void no_exchange(channel_context& ctx, const std::string& name) {
  // A name no exchange can have says why (a headers exchange, a dot under hip).
  if (auto bad = routing::check_name(names(ctx), "exchange", name); bad && bad->code != wire::reply_code::access_refused)
    return ctx.refuse(*bad, during);
  ctx.fail(wire::reply_code::not_found, "no exchange " + quoted(name) + in_vhost(ctx), during,
           "declare it first, or publish to the default exchange ''");
}

// A mirror miss may be another replica's declaration still on its way (HIP-1326, "Where it
// sits"): the bucket says. The publish carries its own copy of the turn (publish_to).
task<> publish_after_lookup(basic_state& s, publish_request p, turn publish_turn) {
  const std::string name = p.m.exchange;
  auto key = routing::exchange_key(name);
  auto present = co_await entry_present(s.ctx, false, std::move(key), during);
  if (!present) co_return;
  auto plan = *present ? plan_for(s.ctx, p) : publish_plan{};  // the bucket's entry is in the mirror now
  if (!plan.exchange) {
    no_exchange(s.ctx, name);
    co_return;
  }
  publish_to(s, std::move(p), std::move(plan), std::move(publish_turn));
}

}  // namespace

void basic_class::on_publish(wire::basic_publish m, std::string property_octets, std::string body, turn method_turn) {
  auto& ctx = state_->ctx;
  if (m.immediate) {
    return ctx.fail(wire::reply_code::not_implemented,
                    "the immediate flag is not implemented; publish with mandatory to learn that nothing is bound",
                    during);
  }
  broker::count(ctx.state().message_counters().received);
  publish_request p{std::move(m), std::move(property_octets), std::move(body), std::vector<std::string>{}};
  p.cc_keys = read_sender_selected(p.property_octets);
  auto plan = plan_for(ctx, p);
  if (plan.exchange) return publish_to(*state_, std::move(p), std::move(plan), std::move(method_turn));
  ctx.spawn(during, publish_after_lookup(*state_, std::move(p), method_turn), method_turn);
}

}  // namespace amqp::broker
