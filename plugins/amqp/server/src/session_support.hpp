#pragma once
// What the session's files share (session.cpp: channels and the broker's port; handshake.cpp;
// session_io.cpp: the socket, output and deadlines): naming methods.
#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "amqp/wire/codec.hpp"

namespace amqp::server {

template <class T>
inline bool holds(const wire::method& m) {
  return std::holds_alternative<T>(m);
}

// The class and method a method frame names, read from its first four octets, so that a
// frame that fails to decode can still be named in connection.close.
inline wire::method_key peek_key(std::span<const std::uint8_t> payload) {
  if (payload.size() < 4) return {};
  auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>((payload[at] << 8) | payload[at + 1]);
  };
  return {u16(0), u16(2)};
}

inline std::string name_of(const wire::method& m) { return std::string(wire::info_of(m).name); }

}  // namespace amqp::server
