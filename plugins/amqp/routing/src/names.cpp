#include "amqp/routing/names.hpp"

#include <algorithm>
#include <array>
#include <random>

namespace amqp::routing {
namespace {

using wire::reply_code;

struct standard_name {
  std::string_view exchange;
  std::string_view word;
};

// The standard exchanges and their subject words. '.' is not a word character, so each
// dotted name gets a dash spelling that check_name reserves.
constexpr std::array<standard_name, 4> standard_names{{
    {"", "_"},
    {"amq.direct", "amq-direct"},
    {"amq.fanout", "amq-fanout"},
    {"amq.topic", "amq-topic"},
}};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool is_reserved_word(std::string_view name) {
  return std::any_of(standard_names.begin(), standard_names.end(),
                     [&](const standard_name& s) { return s.word == name; });
}

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

refusal refuse(reply_code code, std::string text) { return refusal{code, std::move(text)}; }

std::optional<refusal> check_characters(std::string_view what, std::string_view name) {
  auto bad = std::find_if_not(name.begin(), name.end(), is_word_char);
  if (bad == name.end()) return std::nullopt;
  std::string prefix = std::string(what) + " name " + quoted(name);
  if (*bad == '.') {
    return refuse(reply_code::precondition_failed,
                  prefix + " holds '.'; a name is one subject word, because exchange 'a' with key "
                           "'b.c' and exchange 'a.b' with key 'c' would otherwise be one subject; "
                           "use '-' or '_' instead");
  }
  return refuse(reply_code::precondition_failed,
                prefix + " holds a character outside [A-Za-z0-9_-]; a name is one subject word "
                         "of letters, digits, '_' and '-'");
}

}  // namespace

bool is_standard_exchange(std::string_view exchange) {
  return std::any_of(standard_names.begin(), standard_names.end(),
                     [&](const standard_name& s) { return s.exchange == exchange; });
}

std::optional<refusal> check_name(std::string_view what, std::string_view name) {
  const bool exchange = what == "exchange";
  if (exchange && name.empty()) {
    return refuse(reply_code::access_refused,
                  "operation not permitted on the default exchange; declare a named exchange");
  }
  if (exchange && is_standard_exchange(name)) return std::nullopt;
  if (name.empty()) {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name is empty; give a name of 1 to 128 characters");
  }
  if (name.starts_with("amq.")) {
    return refuse(reply_code::access_refused,
                  std::string(what) + " name " + quoted(name) +
                      " is reserved: the 'amq.' prefix belongs to the server; choose another name");
  }
  if (name.size() > max_name_length) {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name of " + std::to_string(name.size()) +
                      " characters is too long; a name is at most 128 characters");
  }
  if (auto bad = check_characters(what, name)) return bad;
  if (name == "_") {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name '_' is reserved: the bus spells the default "
                                      "exchange with it; choose another name");
  }
  if (exchange && is_reserved_word(name)) {
    return refuse(reply_code::access_refused,
                  "exchange name " + quoted(name) +
                      " is reserved: it spells a standard 'amq.' exchange on the bus; choose "
                      "another name");
  }
  return std::nullopt;
}

std::string exchange_word(std::string_view exchange) {
  for (const auto& s : standard_names) {
    if (s.exchange == exchange) return std::string(s.word);
  }
  return std::string(exchange);
}

std::string exchange_of_word(std::string_view word) {
  for (const auto& s : standard_names) {
    if (s.word == word) return std::string(s.exchange);
  }
  return std::string(word);
}

bool is_word(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_word_char);
}

std::string random_word(std::size_t length) {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  // One engine per thread, seeded once from the OS: words must not repeat across threads.
  thread_local std::mt19937_64 engine{[] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }()};
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string word;
  for (std::size_t i = 0; i < length; ++i) word += alphabet[pick(engine)];
  return word;
}

std::string generate_queue_name() { return "amq-gen-" + random_word(22); }

}  // namespace amqp::routing
