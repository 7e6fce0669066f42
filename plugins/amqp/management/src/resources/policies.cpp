// Policies, kept in each vhost's topology bucket so every replica applies them; and runtime
// parameters and operator policies, which are not implemented: none is listed, a write of one is
// refused naming the remedy.
#include "handlers.hpp"
#include "off_loop.hpp"

namespace amqp::management {

using json = nlohmann::json;

handled policies(api&, const call& c) { co_return c.list(from_mirrors(c.in, policies_json)); }

handled one_policy(api&, const call& c) {
  auto found = only(from_mirrors(c.in, policies_json), "name", c.arg("name"));
  if (found.empty()) co_return not_found();
  co_return json_reply(200, found[0]);
}

handled change_policy(api&, const call& c) {
  std::optional<std::string> body;
  if (c.r.method != "DELETE") body = c.r.body;
  auto answered = co_await write_policy(c.v(), c.who, c.arg("name"), std::move(body));
  co_return answered;
}

handled write_policy(const vhost& v, const principal& who, const std::string& name, std::optional<std::string> body) {
  auto change = [&who, b = v.broker, vhost = v.name, name, body]() -> std::optional<broker::policy_change> {
    auto client = who.client_for(vhost);
    if (!client) return std::nullopt;
    return body ? broker::put_policy(*b, *client, name, *body) : broker::delete_policy(*b, *client, name);
  };
  auto pool = broker::bus_of(*v.broker)->worker_executor();
  auto done = co_await off_loop(pool, std::move(change));
  if (!done || !*done) co_return refused_vhost();
  const auto& changed = **done;
  if (changed.refused) co_return bad_request("Validation failed\n\n" + *changed.refused + "\n");
  if (changed.failure && changed.denied)
    co_return error_reply(403, "access_refused", "policy " + name + ": " + *changed.failure);
  if (changed.failure) co_return error_reply(503, "bus_unavailable", "policy " + name + ": " + *changed.failure);
  if (!body) co_return changed.existed ? no_content() : not_found();
  co_return changed.existed ? no_content() : created();
}

handled none_set(api&, const call& c) { co_return c.list(json::array()); }

handled not_set(api&, const call&) { co_return not_found(); }

handled put_parameter(api&, const call& c) {
  co_return bad_request("Validation failed\n\ncomponent " + c.arg("component") +
                        " not found: runtime parameters (shovels, federation) are not implemented\n");
}

handled put_operator_policy(api&, const call&) {
  co_return bad_request("Validation failed\n\noperator policies are not implemented: set a policy "
                        "(PUT /api/policies/{vhost}/{name}), which the adaptor applies\n");
}

}  // namespace amqp::management
