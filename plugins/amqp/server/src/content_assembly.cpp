#include "content_assembly.hpp"

#include <algorithm>
#include <utility>

namespace amqp::server {
namespace {

// Reserving the declared size up front would let a client that declares many large bodies
// and sends none of them make the server allocate for all; the body grows as octets arrive.
constexpr std::uint64_t max_reserve = 64 * 1024;
// Past that, each growth reserves four times what has arrived (never past the declared size):
// memory stays in proportion to what the client sent, and a 1 MiB body is moved once, not the
// four times that doubling (and its overshoot at the end) takes.
constexpr std::uint64_t growth = 4;

std::string to_string(std::span<const std::uint8_t> octets) {
  return {reinterpret_cast<const char*>(octets.data()), octets.size()};
}

}  // namespace

void content_assembly::begin(wire::basic_publish method) {
  current_ = assembled_publish{std::move(method), {}, {}};
  body_size_ = 0;
  state_ = expecting::header;
}

content_assembly::outcome content_assembly::on_header(std::uint64_t body_size,
                                                      std::span<const std::uint8_t> property_octets,
                                                      std::uint64_t max_body_size) {
  body_size_ = body_size;
  if (body_size > max_body_size) {
    reset();
    return outcome::too_large;
  }
  current_.property_octets = to_string(property_octets);
  if (body_size == 0) {
    state_ = expecting::nothing;
    return outcome::complete;
  }
  current_.body.reserve(static_cast<std::size_t>(std::min(body_size, max_reserve)));
  state_ = expecting::body;
  return outcome::incomplete;
}

content_assembly::outcome content_assembly::on_body(std::span<const std::uint8_t> octets) {
  if (current_.body.size() + octets.size() > body_size_) {
    reset();
    return outcome::overrun;
  }
  std::string& body = current_.body;
  if (const std::uint64_t needed = body.size() + octets.size(); needed > body.capacity())
    body.reserve(static_cast<std::size_t>(std::min(body_size_, growth * needed)));
  body.append(reinterpret_cast<const char*>(octets.data()), octets.size());
  if (body.size() < body_size_) return outcome::incomplete;
  state_ = expecting::nothing;
  return outcome::complete;
}

assembled_publish content_assembly::take() {
  assembled_publish done = std::move(current_);
  reset();
  return done;
}

void content_assembly::reset() {
  state_ = expecting::nothing;
  current_ = assembled_publish{};
}

}  // namespace amqp::server
