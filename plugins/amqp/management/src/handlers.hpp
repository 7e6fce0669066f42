#pragma once
// The handlers the route table (routes.cpp) names, one file per resource under resources/. Each
// gets the request, its user, what the pattern captured and the vhosts the row's permission let
// through; api.cpp has checked the vhost before the handler runs.
#include <nlohmann/json.hpp>
#include <vector>

#include "amqp/management/service.hpp"
#include "api.hpp"
#include "routes.hpp"
#include "writes.hpp"

namespace amqp::management {

struct call {
  const request& r;
  const principal& who;
  const captures& args;
  // read: the path's vhost, or every vhost the user may use; write: the path's vhost, when it names one.
  std::vector<vhost> in;

  const std::string& arg(std::string_view name) const { return args.at(name); }
  const vhost& v() const { return in.front(); }
  reply list(nlohmann::json items) const;  // shaped by the query, as RabbitMQ shapes a list
};

using handled = boost::asio::awaitable<reply>;

// What `of(vhost name, its topology mirror)` lists for each of `in`'s vhosts, in one array.
template <class Of>
nlohmann::json from_mirrors(const std::vector<vhost>& in, Of of) {
  auto items = nlohmann::json::array();
  for (const auto& v : in)
    for (auto& item : of(v.name, broker::topology_of(*v.broker))) items.push_back(std::move(item));
  return items;
}

// A PUT of a queue or an exchange: the body as its declaration (`Parse`, writes.hpp), then 201
// when the declaration makes it, 204 when the mirror had it (`Find`), as RabbitMQ answers.
template <auto Parse, auto Find, class Ok>
handled declare(api& a, const call& c) {
  const auto& name = c.arg("name");
  auto asked = Parse(name, c.r.body);
  if (!asked.value) co_return bad_request(asked.why);
  const bool existed = (broker::topology_of(*c.v().broker).*Find)(name) != nullptr;
  wire::method m = std::move(*asked.value);
  auto success = existed ? no_content() : created();
  auto answered = co_await a.one_method(c.v(), c.who, std::move(m), is<Ok>, std::move(success));
  co_return answered;
}

// resources/overview.cpp: the node, the user, health.
handled overview(api& a, const call& c);
handled whoami(api& a, const call& c);
handled cluster_name(api& a, const call& c);
handled extensions(api& a, const call& c);
handled feature_flags(api& a, const call& c);
handled nodes(api& a, const call& c);
handled node(api& a, const call& c);
handled health(api& a, const call& c);
handled aliveness(api& a, const call& c);

// resources/vhosts.cpp
handled vhosts(api& a, const call& c);
handled one_vhost(api& a, const call& c);

// resources/queues.cpp
handled queues(api& a, const call& c);
handled one_queue(api& a, const call& c);
handled delete_queue(api& a, const call& c);
handled purge_queue(api& a, const call& c);
handled get_messages(api& a, const call& c);

// resources/exchanges.cpp
handled exchanges(api& a, const call& c);
handled one_exchange(api& a, const call& c);
handled delete_exchange(api& a, const call& c);
handled publish(api& a, const call& c);

// resources/bindings.cpp
handled bindings(api& a, const call& c);
handled queue_bindings(api& a, const call& c);
handled exchange_bindings_source(api& a, const call& c);
handled exchange_bindings_destination(api& a, const call& c);
handled bindings_between(api& a, const call& c);
handled one_binding(api& a, const call& c);
handled bind_queue(api& a, const call& c);
handled unbind_queue(api& a, const call& c);

// resources/clients.cpp: this process's connections, channels and consumers.
handled connections(api& a, const call& c);
handled one_connection(api& a, const call& c);
handled channels(api& a, const call& c);
handled consumers(api& a, const call& c);

// PUT of a queue and of an exchange.
inline constexpr handler_fn declare_queue =
    declare<queue_declaration, &routing::topology::find_queue, wire::queue_declare_ok>;
inline constexpr handler_fn declare_exchange =
    declare<exchange_declaration, &routing::topology::find_exchange, wire::exchange_declare_ok>;

// resources/policies.cpp, with the runtime parameters and operator policies none of which is set.
handled policies(api& a, const call& c);
handled one_policy(api& a, const call& c);
handled change_policy(api& a, const call& c);
handled none_set(api& a, const call& c);
handled not_set(api& a, const call& c);
handled put_parameter(api& a, const call& c);
handled put_operator_policy(api& a, const call& c);
// A policy written to (`body`) or deleted from (nullopt) the vhost's bucket, through `who`'s own
// bus client; the definitions import writes its policies so too.
handled write_policy(const vhost& v, const principal& who, const std::string& name, std::optional<std::string> body);

// resources/import_export.cpp: the definitions file.
handled export_file(api& a, const call& c);
handled import_file(api& a, const call& c);

}  // namespace amqp::management
