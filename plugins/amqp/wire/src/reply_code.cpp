// Reply code names and classes, from the one X-macro list in reply_code.hpp.
#include <array>
#include <cctype>
#include <string>

#include "amqp/wire/reply_code.hpp"

namespace amqp::wire {
namespace {

struct code_row {
  reply_code code;
  std::string_view enumerator;  // "not_found"
  bool hard;
};

constexpr code_row rows[] = {
#define AMQP_X(name, value, hard) {reply_code::name, #name, hard},
    AMQP_REPLY_CODES(AMQP_X)
#undef AMQP_X
};
constexpr std::size_t row_count = std::size(rows);

// RabbitMQ's spelling is the enumerator in capitals: NOT_FOUND, PRECONDITION_FAILED.
const std::array<std::string, row_count>& names() {
  static const auto spelled = [] {
    std::array<std::string, row_count> out;
    for (std::size_t i = 0; i < row_count; ++i) {
      for (char c : rows[i].enumerator) out[i] += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
  }();
  return spelled;
}

const code_row* row_of(reply_code code) {
  for (const auto& r : rows) {
    if (r.code == code) return &r;
  }
  return nullptr;
}

}  // namespace

std::string_view reply_name(reply_code code) {
  const code_row* r = row_of(code);
  return r == nullptr ? std::string_view{"UNKNOWN_REPLY_CODE"} : std::string_view{names()[static_cast<std::size_t>(r - rows)]};
}

bool is_hard_error(reply_code code) {
  const code_row* r = row_of(code);
  return r == nullptr || r->hard;  // a code outside the table is not one a channel can survive
}

std::string reply_text(reply_code code, std::string_view sentence) {
  std::string text(reply_name(code));
  text += " - ";
  text += sentence;
  return text;
}

}  // namespace amqp::wire
