#pragma once
// The management API as one table (routes.cpp): a row per method and RabbitMQ path, with its
// handler, the permission it needs and whether it changes nothing. What no row takes is 404 (no
// pattern has the path) or 405 (patterns have it, for other methods), as RabbitMQ answers.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/awaitable.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replies.hpp"

namespace amqp::management {

class api;
struct call;  // handlers.hpp

// What a row needs of the signed-in user, as the API has always decided it: RabbitMQ's user tags
// are not kept (whoami says administrator), so a user may read all its vhosts hold and write
// through its own bus client, which the bus refuses as it refuses that user's AMQP methods.
enum class permission {
  none,   // nothing of a vhost's is read or changed: the node, the user, health, refused writes
  read,   // the vhosts the user may use: a list is theirs only; a path's vhost must be one (else 401)
  write,  // the user's own bus client in the path's vhost (else 401)
};

using handler_fn = boost::asio::awaitable<reply> (*)(api&, const call&);

struct route {
  std::string_view method;   // GET (HEAD too), PUT, POST or DELETE
  std::string_view pattern;  // RabbitMQ's: "/api/queues/{vhost}/{name}"; "{name...}" takes the rest
  handler_fn answer;
  permission needs;
  bool read_only;  // changes nothing, so HEAD is answered as GET is
};

std::span<const route> routes();

// The segments a row's {names} took, percent-decoded.
struct captures {
  std::vector<std::pair<std::string_view, std::string>> named;
  const std::string* find(std::string_view name) const;
  const std::string& at(std::string_view name) const;  // a name the row's pattern lacks is a table bug
};

struct matched {
  const route* row = nullptr;  // nullptr: refused, 405 when `allow` is set, else 404
  captures args;
  std::string allow;  // the methods the path takes: "GET, HEAD, PUT, DELETE"
};
matched match(std::string_view method, const std::vector<std::string>& path);
// A refused match as RabbitMQ answers it: 404 "Object Not Found", or 405 "Method Not Allowed".
reply refusal(const matched& m);

// What the path's vhost lets through before the row's handler runs: a vhost that is not served is
// 404, one the user may not use 401 (unless the row needs nothing of it); nullopt: go on.
std::optional<reply> vhost_refusal(permission needs, bool exists, bool may_use);

// "/api/queues/%2F/q?columns=name" → segments after `prefix` (percent-decoded) and the query;
// nullopt when the path does not start with `prefix`.
std::optional<request> parse_target(std::string_view target, std::string_view prefix);

}  // namespace amqp::management
