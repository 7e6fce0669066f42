// libFuzzer target over the management API's pure request handling: the input is an HTTP method,
// a request target (path and query), a body and a queued message, separated by NULs. The target is
// parsed and matched against the route table (a row, or 404/405), its query shapes a fixed list,
// and the body is read by every reader a write offers (writes.hpp, request_body.hpp,
// properties_json.hpp, definitions.hpp, and the policy parser PUT /api/policies hands it to). Each
// must answer or refuse with a reason, never throw; every refusal must become a 400 reply.
// Built and run by scripts/fuzz (clang, -fsanitize=fuzzer,address,undefined).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

#include "amqp/routing/names.hpp"
#include "amqp/routing/policy.hpp"
#include "definitions.hpp"
#include "properties_json.hpp"
#include "query.hpp"
#include "replies.hpp"
#include "request_body.hpp"
#include "routes.hpp"
#include "writes.hpp"

namespace {

using json = nlohmann::json;
using namespace amqp::management;

void require(bool ok) {
  if (!ok) std::abort();  // a finding: an answer the API should never give
}

// A refusal as the API answers it: a 400 whose reason says what was wrong.
void require_bad_request(const std::string& why) {
  require(!why.empty());
  const auto answered = bad_request(why);
  require(answered.status == 400 && !answered.body.empty());
}

// The next part of `rest` up to a NUL (all of it when there is none).
std::string_view take_part(std::string_view& rest) {
  const auto nul = rest.find('\0');
  const auto part = rest.substr(0, nul);
  rest = nul == std::string_view::npos ? std::string_view{} : rest.substr(nul + 1);
  return part;
}

// The pattern's {names}, each of which a matched row's captures must hold.
void check_captures(const route& row, const captures& args) {
  for (std::size_t open = row.pattern.find('{'); open != std::string_view::npos;
       open = row.pattern.find('{', open + 1)) {
    auto name = row.pattern.substr(open + 1, row.pattern.find('}', open) - open - 1);
    if (name.ends_with("...")) name.remove_suffix(3);
    require(args.find(name) != nullptr);
  }
  if (const auto* props = args.find("props")) {
    require(routing_key_of(properties_key(routing_key_of(*props))) == routing_key_of(*props));
  }
}

void check_match(std::string_view method, const request& r) {
  const auto m = match(method, r.path);
  if (m.row) {
    require(m.row->method == method || (method == "HEAD" && m.row->read_only));
    check_captures(*m.row, m.args);
    return;
  }
  const auto refused = refusal(m);
  require(refused.status == (m.allow.empty() ? 404u : 405u));
}

// What a list answers for the query, as call::list shapes it.
void check_list(const query& q) {
  static const json items = json::parse(R"([
    {"name":"orders","vhost":"/","durable":true,"messages":3,"arguments":{"x-queue-type":"quorum"}},
    {"name":"orders.dlx","vhost":"/","durable":false,"messages":0,"arguments":{}},
    {"name":"amq.gen-1","vhost":"other","durable":false,"messages":12},
    {"name":"","vhost":"/","messages":null}])");
  (void)keep_columns(items[0], q);
  const auto shaped = shape_list(items, q);
  if (shaped.bad_request) {
    require(shaped.bad_request->starts_with("page") || shaped.bad_request->starts_with("name"));
    return require_bad_request(*shaped.bad_request);
  }
  require(json_reply(200, shaped.body).status == 200);
  if (shaped.body.is_array()) return require(shaped.body.size() <= items.size());
  require(shaped.body.is_object() && shaped.body["items"].size() <= shaped.body["page_size"].get<std::size_t>());
}

template <class T>
void check_asked(const asked<T>& a) {
  if (!a.value) require_bad_request(a.why);
}

// The body's fields read every way request_body reads one; an error names its field.
void check_request_body(const std::string& body) {
  std::string why;
  auto b = request_body::parse(body, why);
  if (!b) return require_bad_request(why);
  static constexpr const char* keys[] = {"durable", "count", "routing_key", "arguments", "properties"};
  for (const char* key : keys) {
    (void)b->flag(key, false);
    (void)b->number(key, 0);
    (void)b->text(key, "");
    (void)b->table(key);
  }
  if (!b->error()) return;
  require(std::any_of(std::begin(keys), std::end(keys), [&](const char* k) { return b->error()->starts_with(k); }));
  require_bad_request(*b->error());
}

// A table or properties read from JSON must read back to the same JSON once written.
void check_json_values(const std::string& body) {
  const auto j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return;
  std::string why;
  if (auto t = table_of(j, why)) {
    const auto once = to_json(*t);
    auto again = table_of(once, why);
    require(again && to_json(*again) == once);
  }
  why.clear();
  if (auto p = properties_of(j, why)) {
    const auto once = to_json(*p);
    auto again = properties_of(once, why);
    require(again && to_json(*again) == once);
  } else {
    require_bad_request(why);
  }
}

// `message`: any octets, as a queue's message and its property octets may be.
void check_writes(const std::string& name, const std::string& body, const std::string& message) {
  check_asked(queue_declaration(name, body));
  check_asked(exchange_declaration(name, body));
  check_asked(binding_request(name, name, body));
  check_asked(publication_request(name, body));
  const auto get = get_messages_request(body);
  check_asked(get);
  if (!get.value) return;
  const auto got = got_message_json(amqp::wire::basic_get_ok{1, false, name, name, 0}, message, message, *get.value);
  require(json_reply(200, got).status == 200);
}

// A policy as PUT /api/policies and the definitions import hand it to the broker.
void check_policy(const std::string& name, const std::string& body) {
  (void)amqp::routing::check_name(amqp::routing::name_rules::escaped, "policy", name);
  auto p = amqp::routing::parse_policy(body, amqp::routing::name_rules::escaped);
  if (!p) return require_bad_request(p.error().text);
  auto again = amqp::routing::parse_policy(amqp::routing::encode_policy(*p), amqp::routing::name_rules::escaped);
  require(again && *again == *p);
}

void check_definitions(const std::string& body, const std::optional<std::string>& vhost) {
  const auto file = json::parse(body, nullptr, false);
  std::string why;
  auto defs = import_definitions(file.is_discarded() ? json() : file, vhost, why);
  if (!defs) return require_bad_request(why);
  for (const auto& e : defs->exchanges)
    if (!table_of(e.arguments, why)) require_bad_request(why);
  for (const auto& q : defs->queues)
    if (!table_of(q.arguments, why)) require_bad_request(why);
  for (const auto& p : defs->policies) check_policy(p.name, p.json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const auto method = take_part(rest);
  const auto target = take_part(rest);
  const std::string body(take_part(rest));
  const std::string message(rest);
  const auto r = parse_target(target, "/api/");
  require(r.has_value() == target.substr(0, target.find('?')).starts_with("/api/"));
  if (r) {
    check_match(method, *r);
    check_list(r->query);
  }
  check_list(parse_query(target));
  const std::string name = r && !r->path.empty() ? r->path.back() : "q";
  check_request_body(body);
  check_json_values(body);
  check_writes(name, body, message);
  check_policy(name, body);
  check_definitions(body, std::nullopt);
  check_definitions(body, name);
  return 0;
}
