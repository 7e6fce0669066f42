// The channel core: keeps a channel's methods in arrival order and hands each to its class's
// handler. A method whose work is asynchronous holds the later ones until it finished, so a
// client sees answers in the order it asked (basic.qos-ok after an earlier basic.ack took
// effect; queue.bind after the queue.declare it depends on).
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/co_spawn.hpp>
#include <deque>
#include <variant>

#include "channel/channel_context.hpp"
#include "channel/handlers.hpp"

namespace amqp::broker {
namespace {

struct publish_item {
  wire::basic_publish method;
  std::string property_octets;
  std::string body;
};
using pending_item = std::variant<wire::method, publish_item>;

// std::visit target: one overload per method a client may send on an open channel. A handler
// that waits for the bus takes the method's turn (channel_context.hpp); the others answer before
// they return, and the turn ends with this object.
struct dispatcher {
  channel_context& ctx;
  turn method_turn;

  void operator()(wire::exchange_declare& m) { on_exchange_declare(ctx, std::move(m), std::move(method_turn)); }
  void operator()(wire::exchange_delete_& m) { on_exchange_delete(ctx, std::move(m), std::move(method_turn)); }
  void operator()(wire::exchange_bind&) { refuse_exchange_binding(ctx, wire::exchange_bind::key); }
  void operator()(wire::exchange_unbind&) { refuse_exchange_binding(ctx, wire::exchange_unbind::key); }

  void operator()(wire::queue_declare& m) { on_queue_declare(ctx, std::move(m), std::move(method_turn)); }
  void operator()(wire::queue_bind& m) { on_queue_bind(ctx, std::move(m), std::move(method_turn)); }
  void operator()(wire::queue_unbind& m) { on_queue_unbind(ctx, std::move(m), std::move(method_turn)); }
  void operator()(wire::queue_purge& m) { on_queue_purge(ctx, std::move(m), std::move(method_turn)); }
  void operator()(wire::queue_delete_& m) { on_queue_delete(ctx, std::move(m), std::move(method_turn)); }

  void operator()(wire::basic_qos& m) { ctx.basic().on_method(std::move(m)); }
  void operator()(wire::basic_consume& m) { ctx.basic().on_method(std::move(m), std::move(method_turn)); }
  void operator()(wire::basic_cancel& m) { ctx.basic().on_method(std::move(m), std::move(method_turn)); }
  void operator()(wire::basic_get& m) { ctx.basic().on_method(std::move(m), std::move(method_turn)); }
  void operator()(wire::basic_ack& m) { ctx.basic().on_method(std::move(m)); }
  void operator()(wire::basic_reject& m) { ctx.basic().on_method(std::move(m)); }
  void operator()(wire::basic_nack& m) { ctx.basic().on_method(std::move(m)); }
  void operator()(wire::basic_recover& m) { ctx.basic().on_method(std::move(m)); }
  void operator()(wire::basic_recover_async& m) { ctx.basic().on_method(std::move(m)); }

  void operator()(wire::channel_flow& m) { on_channel_flow(ctx, std::move(m)); }
  // The server never sends channel.flow, so there is nothing for a flow-ok to answer.
  void operator()(wire::channel_flow_ok&) { refuse_unexpected(ctx, wire::channel_flow_ok::key); }
  void operator()(wire::confirm_select& m) { on_confirm_select(ctx, std::move(m)); }

  void operator()(wire::tx_select&) { refuse_transactions(ctx, wire::tx_select::key); }
  void operator()(wire::tx_commit&) { refuse_transactions(ctx, wire::tx_commit::key); }
  void operator()(wire::tx_rollback&) { refuse_transactions(ctx, wire::tx_rollback::key); }

  // What no client sends on an open channel, by the table (methods.def's sent_by): a method
  // only the server sends, or a connection method. The session keeps channel.open/close/close-ok
  // and basic.publish (content follows it) to itself. A method a client sends on a channel that
  // has no overload above does not compile.
  template <class M>
  void operator()(M&) {
    static_assert(M::sent_by == wire::sender::server || M::class_name == "connection" ||
                      session_handles<M>,
                  "a method clients send on a channel has no handler in the dispatcher");
    refuse_unexpected(ctx, M::key);
  }
  void operator()(std::monostate&) { refuse_unexpected(ctx, wire::method_key{}); }

  template <class M>
  static constexpr bool session_handles =
      std::is_same_v<M, wire::channel_open> || std::is_same_v<M, wire::channel_close> ||
      std::is_same_v<M, wire::channel_close_ok> || std::is_same_v<M, wire::basic_publish>;
};

class channel_impl final : public channel {
 public:
  channel_impl(std::shared_ptr<broker> b, connection_port& port, std::uint16_t id)
      : ctx_(std::make_shared<channel_context>(std::move(b), port, id)) {
    // ctx_ may outlive this object (bus work in flight), but a turn that ends after closed()
    // calls nothing (turn::state::end), and both run on the connection's executor.
    ctx_->on_turn_end([this] {
      busy_ = false;
      pump();
    });
  }

  ~channel_impl() override { closed(); }

  void on_method(wire::method m) override {
    pending_.emplace_back(std::in_place_index<0>, std::move(m));
    pump();
  }

  void on_publish(wire::basic_publish m, std::string property_octets, std::string body) override {
    pending_.emplace_back(std::in_place_index<1>,
                          publish_item{std::move(m), std::move(property_octets), std::move(body)});
    pump();
  }

  void closed() override {
    if (ctx_->is_closed()) return;
    ctx_->enter(channel_phase::closed);
    pending_.clear();
    ctx_->basic().closed();
  }

 private:
  // Runs queued items until one is still working. A turn that ends inside a handler only
  // clears busy_, and the loop continues: no recursion however many methods arrive.
  void pump() {
    if (pumping_) return;
    pumping_ = true;
    while (!busy_ && !pending_.empty() && ctx_->is_open()) {
      pending_item item = std::move(pending_.front());
      pending_.pop_front();
      busy_ = true;
      dispatch(item, ctx_->begin_turn());
    }
    pumping_ = false;
  }

  void dispatch(pending_item& item, turn method_turn) {
    try {
      if (auto* m = std::get_if<wire::method>(&item)) {
        std::visit(dispatcher{*ctx_, std::move(method_turn)}, *m);
      } else {
        auto& p = std::get<publish_item>(item);
        ctx_->basic().on_publish(std::move(p.method), std::move(p.property_octets),
                                 std::move(p.body), std::move(method_turn));
      }
    } catch (const std::exception& e) {
      // A bug or exhaustion, never bad input: the connection cannot be trusted any more.
      ctx_->fail_connection(wire::reply_code::internal_error,
                            std::string("the broker failed while handling a method: ") + e.what(),
                            key_of(item));
    }
  }

  static wire::method_key key_of(const pending_item& item) {
    if (const auto* m = std::get_if<wire::method>(&item)) {
      return std::holds_alternative<std::monostate>(*m) ? wire::method_key{} : wire::info_of(*m).key;
    }
    return wire::basic_publish::key;
  }

  std::shared_ptr<channel_context> ctx_;
  std::deque<pending_item> pending_;
  bool busy_ = false;     // a method's turn has not ended
  bool pumping_ = false;
};

}  // namespace

// ---- channel_context

channel_context::channel_context(std::shared_ptr<broker> b, connection_port& port, std::uint16_t id)
    : broker_(std::move(b)),
      port_(port),
      id_(id),
      connection_id_(port.connection_id()),
      frame_max_(port.frame_max()),
      executor_(port.executor()),
      bus_(port.bus()) {
  basic_ = std::make_unique<basic_class>(*this);
}

channel_context::~channel_context() = default;

void channel_context::send(std::string frames) {
  if (is_open()) port_.send(std::move(frames));
}

void channel_context::fail(wire::reply_code code, std::string_view sentence, wire::method_key offending,
                           std::string_view remedy) {
  if (!is_open()) return;
  log_remedy(code, sentence, offending, remedy);
  broker_->count_refusal(code);
  enter(channel_phase::failed);  // nothing more goes out on this channel but the session's channel.close
  port_.close_channel(id_, code, std::string(sentence), offending);
}

void channel_context::fail_connection(wire::reply_code code, std::string_view sentence,
                                      wire::method_key offending, std::string_view remedy) {
  if (!is_open()) return;
  log_remedy(code, sentence, offending, remedy);
  broker_->count_refusal(code);
  enter(channel_phase::failed);
  port_.close_connection(code, std::string(sentence), offending);
}

void channel_context::log_remedy(wire::reply_code code, std::string_view sentence, wire::method_key offending,
                                 std::string_view remedy) const {
  if (remedy.empty()) return;
  broker_->note("connection " + std::to_string(connection_id_) + ", channel " + std::to_string(id_) + ": " +
                method_name_(offending) + " refused with " + wire::reply_text(code, sentence) + "; " +
                std::string(remedy));
}

void channel_context::refuse(const wire::refusal& r, wire::method_key offending) {
  if (r.code == wire::reply_code::command_invalid) return fail_connection(r.code, r.text, offending, r.remedy);
  fail(r.code, r.text, offending, r.remedy);
}

void channel_context::spawn(wire::method_key during, task<> handler, turn method_turn) {
  boost::asio::co_spawn(
      executor_, std::move(handler),
      [self = shared_from_this(), during, method_turn = std::move(method_turn)](std::exception_ptr e) {
        if (!e) return;
        std::string what = "unknown error";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          what = describe_(x);
        } catch (...) {
        }
        self->refuse(bus_failure_reply(bus::bus_errc::failed, "the broker did not complete " + method_name_(during),
                                       what, "retry on a new channel"),
                     during);
      });
}

void channel_context::enter(channel_phase next) {
  if (next > phase_) phase_ = next;
}

void turn::state::end() {
  if (std::exchange(ended, true)) return;
  if (auto c = channel.lock(); c && c->is_open() && c->next_method_) c->next_method_();
}

std::optional<std::string> channel_context::resolve_queue(const std::string& name,
                                                          wire::method_key during) {
  if (!name.empty()) return name;
  if (!last_queue.empty()) return last_queue;
  fail(wire::reply_code::not_found, "no previously declared queue", during,
       "name the queue, or declare one on this channel first");
  return std::nullopt;
}

std::unique_ptr<channel> open_channel(std::shared_ptr<broker> b, connection_port& port,
                                      std::uint16_t id) {
  b->note_connection_client(port.connection_id(), port.bus());
  return std::make_unique<channel_impl>(std::move(b), port, id);
}

}  // namespace amqp::broker
