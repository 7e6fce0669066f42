#pragma once
// The encode_method template, written once over for_each_field, and the octet writers it
// needs. Included at the end of codec.hpp; not meant to be included on its own.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace amqp::wire {

namespace detail {

inline void put_u8(std::string& out, std::uint8_t v) { out.push_back(static_cast<char>(v)); }

inline void put_u16(std::string& out, std::uint16_t v) {
  put_u8(out, static_cast<std::uint8_t>(v >> 8));
  put_u8(out, static_cast<std::uint8_t>(v));
}

inline void put_u32(std::string& out, std::uint32_t v) {
  put_u16(out, static_cast<std::uint16_t>(v >> 16));
  put_u16(out, static_cast<std::uint16_t>(v));
}

inline void put_u64(std::string& out, std::uint64_t v) {
  put_u32(out, static_cast<std::uint32_t>(v >> 32));
  put_u32(out, static_cast<std::uint32_t>(v));
}

// Overwrites four octets at `at` (a length written as 0 before its contents were known).
inline void patch_u32(std::string& out, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) out[at + i] = static_cast<char>(v >> (24 - 8 * i));
}

// The encoders cannot fail, so a short string longer than 255 octets is cut at the last
// whole UTF-8 character that fits. Names are validated long before they get here; this only
// ever trims an over-long reply text.
inline std::string_view fit_shortstr(std::string_view s) {
  if (s.size() <= 255) return s;
  std::size_t n = 255;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // s[n] starts the cut-off char
  return s.substr(0, n);
}

inline void put_shortstr(std::string& out, std::string_view s) {
  s = fit_shortstr(s);
  put_u8(out, static_cast<std::uint8_t>(s.size()));
  out.append(s);
}

inline void put_longstr(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

// Writes the 7-octet frame header with a zero size; end_frame fills the size in once the
// payload is known, so a payload is written once and never copied.
inline std::size_t begin_frame(std::string& out, frame_type type, std::uint16_t channel) {
  const std::size_t start = out.size();
  put_u8(out, static_cast<std::uint8_t>(type));
  put_u16(out, channel);
  put_u32(out, 0);
  return start;
}

inline void end_frame(std::string& out, std::size_t start) {
  const auto size = static_cast<std::uint32_t>(out.size() - start - frame_header_size);
  patch_u32(out, start + 3, size);
  put_u8(out, frame_end);
}

// Spec §4.2.5.2: consecutive bits share an octet, least significant bit first; any other
// field closes the octet.
class bit_packer {
 public:
  void put(std::string& out, bool v) {
    if (used_ == 8) {
      at_ = out.size();
      out.push_back('\0');
      used_ = 0;
    }
    if (v) out[at_] = static_cast<char>(static_cast<unsigned char>(out[at_]) | (1u << used_));
    ++used_;
  }
  void close() { used_ = 8; }

 private:
  std::size_t at_ = 0;
  unsigned used_ = 8;  // 8: no open octet
};

inline void put_field(std::string& out, bit_packer& bits, kind::bit, bool v) { bits.put(out, v); }
inline void put_field(std::string& out, bit_packer& bits, kind::octet, std::uint8_t v) {
  bits.close();
  put_u8(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::short_, std::uint16_t v) {
  bits.close();
  put_u16(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::long_, std::uint32_t v) {
  bits.close();
  put_u32(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::longlong, std::uint64_t v) {
  bits.close();
  put_u64(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::timestamp, std::uint64_t v) {
  bits.close();
  put_u64(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::shortstr, const std::string& v) {
  bits.close();
  put_shortstr(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::longstr, const std::string& v) {
  bits.close();
  put_longstr(out, v);
}
inline void put_field(std::string& out, bit_packer& bits, kind::table, const field_table& v) {
  bits.close();
  encode_table(out, v);
}

}  // namespace detail

template <class M>
void encode_method(std::string& out, std::uint16_t channel, const M& m) {
  static_assert(std::is_same_v<std::remove_cv_t<decltype(M::key)>, method_key>,
                "encode_method takes a method struct from methods.hpp");
  const std::size_t start = detail::begin_frame(out, frame_type::method, channel);
  detail::put_u16(out, M::key.class_id);
  detail::put_u16(out, M::key.method_id);
  detail::bit_packer bits;
  m.for_each_field([&](auto tag, std::string_view, const auto& value) {
    detail::put_field(out, bits, tag, value);
  });
  detail::end_frame(out, start);
}

}  // namespace amqp::wire
