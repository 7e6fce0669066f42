// Method facts, decoding and variant encoding, all derived from the `method` variant (which is
// methods.def in table order): no class or method id is written here.
#include <array>
#include <string>
#include <utility>

#include "amqp/wire/codec.hpp"
#include "reader.hpp"
#include "table_codec.hpp"

namespace amqp::wire {
namespace {

constexpr std::size_t method_count = std::variant_size_v<method> - 1;  // minus the monostate

// "exchange" + "unbind_ok" → "exchange.unbind-ok"; the C++ keyword suffix of delete_ goes.
std::string spell(std::string_view cls, std::string_view meth) {
  if (meth.ends_with('_')) meth.remove_suffix(1);
  std::string name(cls);
  name += '.';
  for (char c : meth) name += c == '_' ? '-' : c;
  return name;
}

struct method_table {
  std::array<std::string, method_count> names;
  std::array<method_info, method_count> infos;
};

template <std::size_t... I>
void fill(method_table& t, std::index_sequence<I...>) {
  ((t.names[I] = spell(std::variant_alternative_t<I, method>::class_name,
                       std::variant_alternative_t<I, method>::method_name)),
   ...);
  ((t.infos[I] = method_info{std::variant_alternative_t<I, method>::key, t.names[I],
                             std::variant_alternative_t<I, method>::sent_by,
                             std::variant_alternative_t<I, method>::synchronous,
                             std::variant_alternative_t<I, method>::carries_content}),
   ...);
}

const method_table& table() {
  static const method_table t = [] {
    method_table built;
    fill(built, std::make_index_sequence<method_count>{});
    return built;
  }();
  return t;
}

// The receiving half of the spec's bit packing: a bit takes the next bit of the open octet,
// or opens a new one; any other field closes it.
class bit_unpacker {
 public:
  bool get(reader& r, bool& v) {
    if (used_ == 8) {
      if (!r.u8(octet_)) return false;
      used_ = 0;
    }
    v = (octet_ >> used_++) & 1u;
    return true;
  }
  void close() { used_ = 8; }

 private:
  std::uint8_t octet_ = 0;
  unsigned used_ = 8;
};

// Each read_field returns false on failure; `error` is set only when the cause is more than
// plain truncation (the caller words truncation itself, naming the method and field).
bool read_field(reader& r, bit_unpacker& bits, kind::bit, bool& v, refusal&) { return bits.get(r, v); }
bool read_field(reader& r, bit_unpacker& bits, kind::octet, std::uint8_t& v, refusal&) {
  bits.close();
  return r.u8(v);
}
bool read_field(reader& r, bit_unpacker& bits, kind::short_, std::uint16_t& v, refusal&) {
  bits.close();
  return r.u16(v);
}
bool read_field(reader& r, bit_unpacker& bits, kind::long_, std::uint32_t& v, refusal&) {
  bits.close();
  return r.u32(v);
}
bool read_field(reader& r, bit_unpacker& bits, kind::longlong, std::uint64_t& v, refusal&) {
  bits.close();
  return r.u64(v);
}
// No 0-9-1 method has a timestamp argument today; the kind exists for the table's sake.
[[maybe_unused]] bool read_field(reader& r, bit_unpacker& bits, kind::timestamp, std::uint64_t& v, refusal&) {
  bits.close();
  return r.u64(v);
}
bool read_field(reader& r, bit_unpacker& bits, kind::shortstr, std::string& v, refusal&) {
  bits.close();
  std::uint8_t len = 0;
  return r.u8(len) && r.take(len, v);
}
bool read_field(reader& r, bit_unpacker& bits, kind::longstr, std::string& v, refusal& error) {
  bits.close();
  std::uint32_t len = 0;
  if (!r.u32(len)) return false;
  if (r.take(len, v)) return true;
  error = {reply_code::syntax_error, "long string of " + std::to_string(len) + " octets overruns the " +
                                         std::to_string(r.remaining()) + " octets left in the frame"};
  return false;
}
bool read_field(reader& r, bit_unpacker& bits, kind::table, field_table& v, refusal& error) {
  bits.close();
  return read_table(r, v, error);
}

template <class M>
result<method> decode_as(std::span<const std::uint8_t> args, std::string_view name) {
  M m;
  reader r(args);
  bit_unpacker bits;
  refusal error{reply_code::syntax_error, {}};
  std::string_view failed_field;
  m.for_each_field([&](auto tag, std::string_view field, auto& value) {
    if (failed_field.empty() && !read_field(r, bits, tag, value, error)) failed_field = field;
  });
  const std::string where = std::string(name) + ": argument '" + std::string(failed_field) + "'";
  if (!failed_field.empty() && error.text.empty()) {
    return refusal{reply_code::syntax_error, where + " is truncated; the method frame ends early"};
  }
  if (!failed_field.empty()) return refusal{error.code, where + ": " + error.text};
  if (r.remaining() != 0) {
    return refusal{reply_code::syntax_error, std::string(name) + ": " + std::to_string(r.remaining()) +
                                                    " octets follow the last argument"};
  }
  return method{std::move(m)};
}

using decoder = result<method> (*)(std::span<const std::uint8_t>, std::string_view);

template <std::size_t... I>
constexpr std::array<decoder, method_count> make_decoders(std::index_sequence<I...>) {
  return {&decode_as<std::variant_alternative_t<I, method>>...};
}
constexpr auto decoders = make_decoders(std::make_index_sequence<method_count>{});

}  // namespace

std::span<const method_info> all_methods() { return table().infos; }

const method_info* find_method(method_key key) {
  for (const auto& info : table().infos) {
    if (info.key == key) return &info;
  }
  return nullptr;
}

const method_info& info_of(const method& m) {
  static const method_info none{{}, "(no method)", sender::client, false, false};
  return m.index() < method_count ? table().infos[m.index()] : none;
}

result<method> decode_method(std::span<const std::uint8_t> payload) {
  reader r(payload);
  method_key key;
  if (!r.u16(key.class_id) || !r.u16(key.method_id)) {
    return refusal{reply_code::syntax_error,
                      "method frame of " + std::to_string(payload.size()) +
                          " octets is too short to hold its class and method ids (4 octets)"};
  }
  const method_info* info = find_method(key);
  if (info == nullptr) {
    return refusal{reply_code::command_invalid,
                      "unknown method: class " + std::to_string(key.class_id) + ", method " +
                          std::to_string(key.method_id) + " is not an AMQP 0-9-1 method"};
  }
  const auto index = static_cast<std::size_t>(info - table().infos.data());
  return decoders[index](payload.subspan(4), info->name);
}

void encode_method(std::string& out, std::uint16_t channel, const method& m) {
  std::visit(
      [&](const auto& x) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) encode_method(out, channel, x);
      },
      m);
}

}  // namespace amqp::wire
