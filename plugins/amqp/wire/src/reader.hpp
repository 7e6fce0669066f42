#pragma once
// A bounds-checked big-endian cursor over received octets. Every read checks the remaining
// length first, so a length field can never make the decoder read or allocate past its input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace amqp::wire {

class reader {
 public:
  explicit reader(std::span<const std::uint8_t> in) : in_(in) {}

  std::size_t remaining() const { return in_.size() - pos_; }
  std::size_t position() const { return pos_; }

  bool u8(std::uint8_t& v) {
    if (remaining() < 1) return false;
    v = in_[pos_++];
    return true;
  }
  bool u16(std::uint16_t& v) { return be(v); }
  bool u32(std::uint32_t& v) { return be(v); }
  bool u64(std::uint64_t& v) { return be(v); }

  // The next n octets as a view; false (and nothing consumed) when fewer are left.
  bool take(std::size_t n, std::span<const std::uint8_t>& v) {
    if (remaining() < n) return false;
    v = in_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  // Same, copied into a string; the size is checked before the string grows.
  bool take(std::size_t n, std::string& v) {
    std::span<const std::uint8_t> s;
    if (!take(n, s)) return false;
    v.assign(reinterpret_cast<const char*>(s.data()), s.size());
    return true;
  }

 private:
  template <class T>
  bool be(T& v) {
    if (remaining() < sizeof(T)) return false;
    T x = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) x = static_cast<T>((x << 8) | in_[pos_ + i]);
    pos_ += sizeof(T);
    v = x;
    return true;
  }

  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

}  // namespace amqp::wire
