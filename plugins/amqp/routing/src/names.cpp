#include "amqp/routing/names.hpp"

#include <openssl/evp.h>

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

// The standard exchanges and their subject words (HIP-1326, "Exchanges, queues and bindings
// become subjects, consumers and filters"): '.' is not a word character, so each dotted name
// has a dash spelling, which no user exchange is given (exchange_word).
constexpr std::array<standard_name, 4> standard_names{{
    {"", "_"},
    {"amq.direct", "amq-direct"},
    {"amq.fanout", "amq-fanout"},
    {"amq.topic", "amq-topic"},
}};

// RabbitMQ's headers exchanges, which exist there and route on what HIP-1326's "What is not
// implemented, and how it says so" refuses.
constexpr std::array<std::string_view, 2> headers_exchanges{"amq.headers", "amq.match"};

constexpr std::string_view hex_digits = "0123456789ABCDEF";
// Marks a consumer name cut short (consumer_name): '=' is always followed by a hex digit in a word.
constexpr std::string_view hashed_mark = "=Z";

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool is_reserved_word(std::string_view word) {
  return std::any_of(standard_names.begin(), standard_names.end(),
                     [&](const standard_name& s) { return s.word == word; });
}

bool is_headers_exchange(std::string_view name) {
  return std::find(headers_exchanges.begin(), headers_exchanges.end(), name) != headers_exchanges.end();
}

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

wire::refusal refuse(reply_code code, std::string text, std::string remedy = {}) {
  return wire::refusal{code, std::move(text), std::move(remedy)};
}

void append_hex(std::string& out, unsigned char octet) {
  out += hex_digits[octet >> 4];
  out += hex_digits[octet & 0xF];
}

void append_escaped(std::string& out, unsigned char octet) {
  out += '=';
  append_hex(out, octet);
}

// One octet of a name as name_word spells it: itself, or its escape.
void append_spelled(std::string& out, char c) {
  if (is_word_char(c)) {
    out += c;
  } else {
    append_escaped(out, static_cast<unsigned char>(c));
  }
}

int hex_value(char c) {
  auto at = hex_digits.find(c);
  return at == std::string_view::npos ? -1 : static_cast<int>(at);
}

// Every '=' followed by two upper-case hex digits becomes its octet; nullopt for anything else
// outside the word alphabet. Not every decodable word is canonical: callers re-spell to check.
std::optional<std::string> decode_word(std::string_view word) {
  std::string name;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (is_word_char(word[i])) {
      name += word[i];
      continue;
    }
    if (word[i] != '=' || i + 2 >= word.size()) return std::nullopt;
    const int high = hex_value(word[i + 1]), low = hex_value(word[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    name += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return name;
}

// The name a word spells, when `spell` spells it so exactly (the one canonical spelling).
template <class Spell>
std::optional<std::string> canonical_name(std::string_view word, Spell spell) {
  auto name = decode_word(word);
  if (!name || name->empty() || spell(*name) != word) return std::nullopt;
  return name;
}

std::string sha256_hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned int i = 0; i < size; ++i) append_hex(out, digest[i]);
  return out;
}

std::optional<wire::refusal> check_hip_name(std::string_view what, std::string_view name) {
  const std::string prefix = std::string(what) + " name " + quoted(name);
  if (name.size() > max_hip_name_length) {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name of " + std::to_string(name.size()) +
                      " characters is too long; a name is at most 128 characters (CLOUD_AMQP_NAMES=hip), "
                      "or 255 under CLOUD_AMQP_NAMES=escaped");
  }
  auto bad = std::find_if_not(name.begin(), name.end(), is_word_char);
  if (bad != name.end() && *bad == '.') {
    return refuse(reply_code::precondition_failed,
                  prefix + " holds '.', which CLOUD_AMQP_NAMES=hip refuses (exchange 'a' with key 'b.c' and "
                           "exchange 'a.b' with key 'c' would be one subject); use '-' or '_' instead, or set "
                           "CLOUD_AMQP_NAMES=escaped");
  }
  if (bad != name.end()) {
    return refuse(reply_code::precondition_failed,
                  prefix + " holds a character outside [A-Za-z0-9_-], which CLOUD_AMQP_NAMES=hip refuses; "
                           "rename it, or set CLOUD_AMQP_NAMES=escaped");
  }
  if (name == "_") {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name '_' is reserved under CLOUD_AMQP_NAMES=hip: the bus spells the "
                                      "default exchange with it; choose another name");
  }
  if (what == "exchange" && is_reserved_word(name)) {
    return refuse(reply_code::access_refused,
                  "exchange name " + quoted(name) +
                      " is reserved under CLOUD_AMQP_NAMES=hip: it spells a standard 'amq.' exchange on the "
                      "bus; choose another name");
  }
  return std::nullopt;
}

std::optional<wire::refusal> check_escaped_name(std::string_view what, std::string_view name) {
  if (name.size() > max_name_length) {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name of " + std::to_string(name.size()) +
                      " octets is too long; a name is at most 255 octets");
  }
  if (!is_utf8(name)) {
    return refuse(reply_code::precondition_failed,
                  std::string(what) + " name holds octets that are not UTF-8; a name is UTF-8 text");
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(name_rules rules) { return rules == name_rules::hip ? "hip" : "escaped"; }

std::optional<name_rules> parse_name_rules(std::string_view text) {
  for (auto rules : {name_rules::hip, name_rules::escaped})
    if (text == to_string(rules)) return rules;
  return std::nullopt;
}

bool is_standard_exchange(std::string_view exchange) {
  return std::any_of(standard_names.begin(), standard_names.end(),
                     [&](const standard_name& s) { return s.exchange == exchange; });
}

std::optional<wire::refusal> check_name(name_rules rules, std::string_view what, std::string_view name) {
  const bool exchange = what == "exchange";
  if (exchange && name.empty()) {
    return refuse(reply_code::access_refused, "operation not permitted on the default exchange",
                  "declare a named exchange");
  }
  if (exchange && is_standard_exchange(name)) return std::nullopt;
  if (exchange && is_headers_exchange(name)) {
    return refuse(reply_code::not_implemented,
                  "exchange " + quoted(name) +
                      " is a headers exchange, which routes on something other than a name and has no subject "
                      "to be; bind by routing key on a direct or topic exchange");
  }
  if (name.empty()) {
    return refuse(reply_code::precondition_failed, std::string(what) + " name is empty; give it a name");
  }
  return rules == name_rules::hip ? check_hip_name(what, name) : check_escaped_name(what, name);
}

std::optional<wire::refusal> check_new_name(name_rules rules, std::string_view what, std::string_view name) {
  const bool servers = what == "exchange" && (is_standard_exchange(name) || is_headers_exchange(name));
  if (name.starts_with("amq.") && !servers) {
    return refuse(reply_code::access_refused,
                  std::string(what) + " name " + quoted(name) + " contains reserved prefix 'amq.*'",
                  "the 'amq.' prefix belongs to the server; choose another name");
  }
  return check_name(rules, what, name);
}

bool is_utf8(std::string_view text) {
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < text.size()) {
    unsigned lead = at(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t extra = 0;
    unsigned low = 0x80, high = 0xBF;  // the range of the second octet
    if (lead >= 0xC2 && lead <= 0xDF) {
      extra = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      extra = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      extra = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // truncated
    if (at(i + 1) < low || at(i + 1) > high) return false;
    for (std::size_t k = 2; k <= extra; ++k) {
      if (at(i + k) < 0x80 || at(i + k) > 0xBF) return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string name_word(std::string_view name) {
  std::string word;
  word.reserve(name.size());
  for (char c : name) append_spelled(word, c);
  return word;
}

std::optional<std::string> name_of_word(std::string_view word) { return canonical_name(word, name_word); }

std::string exchange_word(std::string_view exchange) {
  for (const auto& s : standard_names) {
    if (s.exchange == exchange) return std::string(s.word);
  }
  std::string word = name_word(exchange);
  if (!is_reserved_word(word)) return word;
  std::string escaped;
  append_escaped(escaped, static_cast<unsigned char>(exchange.front()));
  return escaped + word.substr(1);
}

std::optional<std::string> exchange_of_word(std::string_view word) {
  for (const auto& s : standard_names) {
    if (s.word == word) return std::string(s.exchange);
  }
  return canonical_name(word, exchange_word);
}

std::string consumer_name(std::string_view queue) {
  std::string word = name_word(queue);
  if (word.size() <= max_consumer_name_length) return word;
  const std::string hash = sha256_hex(queue);
  const std::size_t room = max_consumer_name_length - hashed_mark.size() - hash.size();
  std::string prefix;
  for (char c : queue) {
    if (prefix.size() + (is_word_char(c) ? 1 : 3) > room) break;
    append_spelled(prefix, c);
  }
  return prefix + std::string(hashed_mark) + hash;
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

std::string generate_queue_name(name_rules rules) {
  return std::string(rules == name_rules::hip ? "amq-gen-" : "amq.gen-") + random_word(22);
}

}  // namespace amqp::routing
