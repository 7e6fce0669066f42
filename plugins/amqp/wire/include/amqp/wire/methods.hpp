#pragma once
// One struct per AMQP method, generated from methods.def: named <class>_<method>, fields in
// spec order with the spec's names. `method` is the variant of all of them; the broker
// std::visit's a decoded method and never sees a class or method id literal.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "amqp/wire/field_table.hpp"

namespace amqp::wire {

// The C++ type of each field kind of the table.
namespace kind {
struct octet { using type = std::uint8_t; };
struct short_ { using type = std::uint16_t; };
struct long_ { using type = std::uint32_t; };
struct longlong { using type = std::uint64_t; };
struct bit { using type = bool; };
struct shortstr { using type = std::string; };
struct longstr { using type = std::string; };
struct table { using type = field_table; };
struct timestamp { using type = std::uint64_t; };
}  // namespace kind

#define AMQP_KIND_octet kind::octet
#define AMQP_KIND_short kind::short_
#define AMQP_KIND_long kind::long_
#define AMQP_KIND_longlong kind::longlong
#define AMQP_KIND_bit kind::bit
#define AMQP_KIND_shortstr kind::shortstr
#define AMQP_KIND_longstr kind::longstr
#define AMQP_KIND_table kind::table
#define AMQP_KIND_timestamp kind::timestamp

struct method_key {
  std::uint16_t class_id = 0;
  std::uint16_t method_id = 0;
  constexpr bool operator==(const method_key&) const = default;
};

// Who may send a method (methods.def's sent_by column).
enum class sender : std::uint8_t { client, server, both };

// Static facts about a method: what the table row says.
struct method_info {
  method_key key;
  std::string_view name;  // "basic.publish", "exchange.unbind-ok", "exchange.delete"
  sender sent_by;
  bool synchronous;
  bool carries_content;
};

// A struct per row. `for_each_field(f)` calls f(kind_tag, field_name, member&) in spec order;
// the codec is written once against it.
#define F(k, n) typename AMQP_KIND_##k::type n{};
#define AMQP_METHOD(cls, cid, meth, mid, by, sync, content, fields)                    \
  struct cls##_##meth {                                                            \
    fields static constexpr method_key key{cid, mid};                                \
    static constexpr sender sent_by = sender::by;                                  \
    static constexpr bool synchronous = sync;                                      \
    static constexpr bool carries_content = content;                               \
    static constexpr std::string_view class_name = #cls;                           \
    static constexpr std::string_view method_name = #meth;                         \
    bool operator==(const cls##_##meth&) const = default;                          \
    template <class Fn> void for_each_field(Fn&& f) { visit_fields_(f, *this); }  \
    template <class Fn> void for_each_field(Fn&& f) const { visit_fields_(f, *this); } \
   private:                                                                        \
    template <class Fn, class Self> static void visit_fields_(Fn& f, Self& self);  \
  };
#include "amqp/wire/methods.def"
#undef AMQP_METHOD
#undef F

// The visitors are defined out of line so that the field list is expanded with member access.
#define F(k, n) f(AMQP_KIND_##k{}, std::string_view{#n}, self.n);
#define AMQP_METHOD(cls, cid, meth, mid, by, sync, content, fields)                    \
  template <class Fn, class Self> void cls##_##meth::visit_fields_(Fn& f, Self& self) { \
    (void)f; (void)self; fields                                                    \
  }
#include "amqp/wire/methods.def"
#undef AMQP_METHOD
#undef F

#define AMQP_METHOD(cls, cid, meth, mid, by, sync, content, fields) cls##_##meth,
#define F(k, n)
// The variant of every method, in table order.
using method = std::variant<
#include "amqp/wire/methods.def"
    std::monostate>;  // monostate closes the list; a decoded method is never monostate
#undef AMQP_METHOD
#undef F

// Every row's static facts, in table order (the round-trip test iterates this).
std::span<const method_info> all_methods();
// The facts of one id, or nullptr when no row has it.
const method_info* find_method(method_key key);
// Facts of whatever a variant holds.
const method_info& info_of(const method& m);

}  // namespace amqp::wire
