#include "amqp/routing/subject.hpp"

#include <algorithm>

#include "amqp/routing/filters.hpp"
#include "amqp/routing/names.hpp"

namespace amqp::routing {
namespace {

using wire::reply_code;

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t start = 0;
  for (;;) {
    auto dot = text.find('.', start);
    words.push_back(text.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return words;
    start = dot + 1;
  }
}

// NATS splits its protocol lines on whitespace, so no subject may hold any.
bool has_blank(std::string_view word) {
  return std::any_of(word.begin(), word.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f;
  });
}

bool has_any(std::string_view word, std::string_view chars) {
  return word.find_first_of(chars) != std::string_view::npos;
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::optional<wire::refusal> check_key_length(std::string_view key) {
  if (key.size() <= max_routing_key_length) return std::nullopt;
  return wire::refusal{reply_code::precondition_failed,
                       "routing key of " + std::to_string(key.size()) +
                           " octets is too long; a routing key is a short string of at most 255 octets"};
}

std::optional<wire::refusal> check_publish_word(std::string_view key, std::string_view word) {
  auto refuse = [&](std::string why) {
    return wire::refusal{reply_code::precondition_failed, "routing key " + quoted(key) + " " + why};
  };
  if (word.empty()) {
    return refuse("has an empty word, which a bus subject cannot carry; publish to a key "
                  "without leading, trailing or doubled dots");
  }
  if (has_any(word, "*#>")) {
    return refuse("holds a wildcard ('*', '#' or '>'); a published routing key is literal, so "
                  "publish to a key without them");
  }
  if (has_blank(word)) {
    return refuse("holds whitespace or a control character, which a bus subject cannot carry; "
                  "publish to a key without them");
  }
  return std::nullopt;
}

std::string subject_of(std::string_view exchange, std::string_view tail) {
  std::string subject(subject_root);
  subject += '.';
  subject += exchange_word(exchange);
  if (!tail.empty()) {
    subject += '.';
    subject += tail;
  }
  return subject;
}

wire::refusal not_implemented(std::string text) {
  return wire::refusal{reply_code::not_implemented, std::move(text)};
}

std::optional<wire::refusal> check_binding_word(exchange_kind kind, std::string_view key,
                                                std::string_view word, bool last) {
  std::string subject = "binding key " + quoted(key);
  if (word.empty()) {
    return not_implemented(subject + " has an empty word, which a bus subject cannot carry; bind "
                                     "a key without leading, trailing or doubled dots");
  }
  if (has_blank(word)) {
    return not_implemented(subject + " holds whitespace or a control character, which a bus "
                                     "subject cannot carry; bind a key without them");
  }
  if (has_any(word, ">")) {
    return not_implemented(subject + " holds '>', which the bus reads as a wildcard and no "
                                     "published key can hold; bind a key without it");
  }
  if (kind == exchange_kind::direct) {
    if (!has_any(word, "*#")) return std::nullopt;
    return not_implemented("a direct binding key matches literally; " + subject +
                           " holds a wildcard, so bind it on a topic exchange instead");
  }
  if (word == "*") return std::nullopt;
  if (word == "#") {
    if (last) return std::nullopt;
    return not_implemented(subject + " has '#' before the end; NATS matches a rest-wildcard only "
                                     "in last position, so bind with '#' as the last word");
  }
  if (!has_any(word, "*#")) return std::nullopt;
  return not_implemented(subject + " has a partial wildcard in word " + quoted(word) +
                         "; NATS has no such match, so use '*' or '#' as a whole word");
}

}  // namespace

std::string_view to_string(exchange_kind kind) {
  switch (kind) {
    case exchange_kind::direct: return "direct";
    case exchange_kind::fanout: return "fanout";
    case exchange_kind::topic: return "topic";
  }
  return "direct";
}

wire::result<exchange_kind> parse_exchange_kind(std::string_view kind) {
  for (auto k : {exchange_kind::direct, exchange_kind::fanout, exchange_kind::topic}) {
    if (kind == to_string(k)) return k;
  }
  if (kind.empty()) {
    return wire::refusal{reply_code::command_invalid,
                         "exchange type is empty; declare it with type direct, fanout or topic"};
  }
  if (kind == "headers") {
    return not_implemented("exchange kind " + quoted(kind) +
                           " routes on something other than a name and has no subject to be; bind "
                           "by routing key on a direct or topic exchange");
  }
  // RabbitMQ's answer to a type no broker defines (a connection exception).
  return wire::refusal{reply_code::command_invalid,
                       "unknown exchange type " + quoted(kind) + "; declare it with type direct, fanout or topic"};
}

wire::result<std::string> publish_subject(std::string_view exchange, std::string_view routing_key) {
  if (auto bad = check_key_length(routing_key)) return *bad;
  // The default exchange's key names a queue: it is spelled as the queue's word.
  if (exchange.empty()) return subject_of(exchange, routing_key.empty() ? "" : name_word(routing_key));
  if (!routing_key.empty()) {
    for (auto word : split_words(routing_key)) {
      if (auto bad = check_publish_word(routing_key, word)) return *bad;
    }
  }
  return subject_of(exchange, routing_key);
}

std::string queue_subject(std::string_view queue) { return subject_of("", name_word(queue)); }
std::string queue_subjects() { return subject_of("", ">"); }

namespace {
constexpr std::string_view reply_subject_root = "amqp-reply";
}  // namespace

std::string direct_reply_address(std::string_view token) {
  return std::string(direct_reply_queue) + "." + std::string(token);
}

std::string direct_reply_subject_of(std::string_view token) {
  return std::string(reply_subject_root) + "." + std::string(token);
}

bool names_direct_reply(std::string_view routing_key) {
  return routing_key.size() > direct_reply_queue.size() && routing_key.starts_with(direct_reply_queue) &&
         routing_key[direct_reply_queue.size()] == '.';
}

std::optional<std::string> direct_reply_subject(std::string_view routing_key) {
  if (!names_direct_reply(routing_key)) return std::nullopt;
  const auto token = routing_key.substr(direct_reply_queue.size() + 1);
  if (!is_word(token)) return std::nullopt;
  return direct_reply_subject_of(token);
}

bool blank_publish_key(std::string_view routing_key) {
  if (check_key_length(routing_key) || routing_key.empty()) return false;
  bool blank = false;
  for (auto word : split_words(routing_key)) {
    if (word.empty() || has_any(word, "*#>")) return false;
    blank = blank || has_blank(word);
  }
  return blank;
}

std::optional<address> split_subject(std::string_view subject) {
  const std::string prefix = std::string(subject_root) + ".";
  if (!subject.starts_with(prefix)) return std::nullopt;
  subject.remove_prefix(prefix.size());
  auto dot = subject.find('.');
  auto word = subject.substr(0, dot);
  if (word.empty()) return std::nullopt;
  auto exchange = exchange_of_word(word);
  if (!exchange) return std::nullopt;
  address a{*exchange, {}};
  if (dot == std::string_view::npos) return a;
  const auto tail = subject.substr(dot + 1);
  // A default-exchange key is a queue's word; a tail that is none is kept as it was published.
  auto queue = exchange->empty() ? name_of_word(tail) : std::nullopt;
  a.routing_key = queue ? *queue : std::string(tail);
  return a;
}

wire::result<std::vector<std::string>> binding_filters(std::string_view exchange, exchange_kind kind,
                                                       std::string_view key) {
  // A fanout binding ignores its key entirely, as AMQP says; the bare stem catches the
  // empty-key publish that `>` (one or more words) would miss.
  if (kind == exchange_kind::fanout) {
    return normalize_filters({subject_of(exchange, ">"), subject_of(exchange, "")});
  }
  if (auto bad = check_key_length(key)) return *bad;
  if (!is_utf8(key)) {
    return wire::refusal{reply_code::precondition_failed,
                         "binding key holds octets that are not UTF-8; bindings are kept as JSON text "
                         "in the topology bucket, so bind a UTF-8 key"};
  }
  if (key.empty()) return std::vector<std::string>{subject_of(exchange, "")};
  if (exchange.empty()) return std::vector<std::string>{subject_of(exchange, name_word(key))};
  auto words = split_words(key);
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (auto bad = check_binding_word(kind, key, words[i], i + 1 == words.size())) return *bad;
  }
  if (words.back() != "#") return std::vector<std::string>{subject_of(exchange, key)};
  // AMQP's `#` is zero or more words and NATS's `>` one or more: two filters (HIP-1326,
  // "`#` is not `>`").
  auto stem = key.substr(0, key.size() - 1);  // "a.b." or ""
  if (!stem.empty()) stem.remove_suffix(1);
  std::string rest = stem.empty() ? std::string(">") : std::string(stem) + ".>";
  return normalize_filters({subject_of(exchange, rest), subject_of(exchange, stem)});
}

}  // namespace amqp::routing
