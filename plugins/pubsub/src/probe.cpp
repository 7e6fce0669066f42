#include "probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

namespace cloud::pubsub {
namespace {

using clock = std::chrono::steady_clock;

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

struct addr_list {
  addrinfo* head = nullptr;
  ~addr_list() {
    if (head) ::freeaddrinfo(head);
  }
};

int remaining_ms(clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

std::string resolve(const std::string& host, std::uint16_t port, int flags, addr_list& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  const auto service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out.head);
  if (rc != 0) return "cannot resolve " + host + ": " + ::gai_strerror(rc);
  return {};
}

// A non-blocking connect bounded by the deadline.
std::string connect_to(const std::string& host, std::uint16_t port, clock::time_point deadline, fd_guard& sock) {
  addr_list addrs;
  if (auto e = resolve(host, port, 0, addrs); !e.empty()) return e;
  std::string error = "no address for " + host;
  for (auto* a = addrs.head; a; a = a->ai_next) {
    fd_guard s{::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol)};
    if (s.fd < 0) continue;
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
      continue;
    }
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) != 1) {
      error = "connect timed out";
      continue;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      error = std::strerror(so_error);
      continue;
    }
    std::swap(sock.fd, s.fd);
    return {};
  }
  return host + ":" + std::to_string(port) + ": " + error;
}

// Reads until `done(buffer)` or the deadline; "" on done.
template <class Done>
std::string read_until(int fd, std::string& buffer, clock::time_point deadline, Done done) {
  char chunk[4096];
  while (!done(buffer)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) != 1) return "no answer in time";
    const auto n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n == 0) return "the server closed the connection";
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return std::strerror(errno);
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
    if (buffer.size() > 1024 * 1024) return "unexpectedly long answer";
  }
  return {};
}

std::string send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const auto n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return std::strerror(errno);
    sent += static_cast<std::size_t>(n);
  }
  return {};
}

std::uint64_t json_number(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return 0;
  const char* begin = json.data() + at + key.size() + 3;
  std::uint64_t value = 0;
  std::from_chars(begin, json.data() + json.size(), value);
  return value;
}

}  // namespace

std::string json_string(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return {};
  auto pos = json.find_first_not_of(" \t", at + key.size() + 3);
  if (pos == std::string::npos || json[pos] != '"') return {};
  std::string value;
  for (++pos; pos < json.size(); ++pos) {
    const char c = json[pos];
    if (c == '"') return value;
    if (c == '\\' && pos + 1 < json.size()) {
      value += json[++pos];
      continue;
    }
    value += c;
  }
  return {};  // unterminated
}

namespace {

std::string read_info(int fd, std::string& buffer, clock::time_point deadline, server_info& info) {
  auto e = read_until(fd, buffer, deadline, [](const std::string& b) { return b.find("\r\n") != std::string::npos; });
  if (!e.empty()) return e;
  const auto line = buffer.substr(0, buffer.find("\r\n"));
  if (line.rfind("INFO ", 0) != 0) return "not a NATS server (first line: " + line.substr(0, 80) + ")";
  info.max_payload = json_number(line, "max_payload");
  info.jetstream = line.find("\"jetstream\":true") != std::string::npos;
  info.version = json_string(line, "version");
  buffer.erase(0, line.size() + 2);
  return {};
}

}  // namespace

info_result probe_info(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  fd_guard sock;
  if (auto e = connect_to(host, port, deadline, sock); !e.empty()) return {std::nullopt, e};
  std::string buffer;
  server_info info;
  if (auto e = read_info(sock.fd, buffer, deadline, info); !e.empty()) return {std::nullopt, e};
  return {info, {}};
}

namespace {

// A JSON string's contents: quotes, backslashes and control characters escaped.
std::string json_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string probe_jetstream(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                            server_info* info_out, const std::string& user, const std::string& password) {
  const auto deadline = clock::now() + timeout;
  fd_guard sock;
  if (auto e = connect_to(host, port, deadline, sock); !e.empty()) return e;
  std::string buffer;
  server_info info;
  if (auto e = read_info(sock.fd, buffer, deadline, info); !e.empty()) return e;
  if (info_out) *info_out = info;
  if (!info.jetstream) return "the server runs without JetStream";
  const std::string inbox = "_INBOX.cloud_pubsub_probe";
  const std::string credentials =
      user.empty() ? std::string{} : ",\"user\":\"" + json_escaped(user) + "\",\"pass\":\"" + json_escaped(password) + "\"";
  const std::string request = "CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"cloud-pubsub-probe\"" +
                              credentials + "}\r\nSUB " + inbox + " 1\r\nPUB $JS.API.INFO " + inbox + " 0\r\n\r\n";
  if (auto e = send_all(sock.fd, request); !e.empty()) return e;
  const std::string marker = "MSG " + inbox + " 1 ";
  std::string payload;
  auto e = read_until(sock.fd, buffer, deadline, [&](const std::string& b) {
    if (b.find("-ERR") != std::string::npos) return true;
    const auto at = b.find(marker);
    if (at == std::string::npos) return false;
    const auto eol = b.find("\r\n", at);
    if (eol == std::string::npos) return false;
    std::size_t size = 0;
    std::from_chars(b.data() + at + marker.size(), b.data() + eol, size);
    if (b.size() < eol + 2 + size) return false;
    payload = b.substr(eol + 2, size);
    return true;
  });
  if (!e.empty()) return "JetStream did not answer: " + e;
  if (const auto err = buffer.find("-ERR"); err != std::string::npos && payload.empty()) {
    return "the server refused the probe: " + buffer.substr(err, buffer.find("\r\n", err) - err);
  }
  if (payload.find("\"error\"") != std::string::npos) return "JetStream answered an error: " + payload;
  if (payload.find("account_info_response") == std::string::npos) return "unexpected JetStream answer: " + payload;
  return {};
}

std::optional<std::pair<std::string, std::uint16_t>> split_url(const std::string& url) {
  auto rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  if (const auto at = rest.rfind('@'); at != std::string::npos) rest.erase(0, at + 1);
  rest = rest.substr(0, rest.find('/'));
  std::string host = rest;
  std::uint16_t port = 4222;
  const auto colon = rest.rfind(':');
  const auto bracket = rest.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = rest.substr(0, colon);
    unsigned value = 0;
    const auto text = rest.substr(colon + 1);
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || value == 0 || value > 65535) {
      return std::nullopt;
    }
    port = static_cast<std::uint16_t>(value);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return std::nullopt;
  return std::make_pair(host, port);
}

std::string redacted(const std::string& urls) {
  std::string out;
  std::size_t begin = 0;
  while (begin <= urls.size()) {
    const auto end = std::min(urls.find(',', begin), urls.size());
    std::string url = urls.substr(begin, end - begin);
    const auto from = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
    const auto at = url.find('@', from);
    const auto colon = url.find(':', from);
    if (at != std::string::npos && colon < at) {
      url.replace(colon + 1, at - colon - 1, "***");
    } else if (at != std::string::npos) {
      url.replace(from, at - from, "***");  // a token
    }
    out += (begin == 0 ? "" : ",") + url;
    begin = end + 1;
  }
  return out;
}

std::string claim_port(const std::string& host, std::uint16_t port) {
  addr_list addrs;
  if (auto e = resolve(host, port, AI_PASSIVE, addrs); !e.empty()) return e;
  // SO_REUSEADDR, as nats-server (Go) binds: a listener is a conflict, the TIME_WAIT sockets
  // of a server that just died are not.
  fd_guard s{::socket(addrs.head->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return std::strerror(errno);
  const int on = 1;
  if (::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) return std::strerror(errno);
  if (::bind(s.fd, addrs.head->ai_addr, addrs.head->ai_addrlen) != 0) return std::strerror(errno);
  return {};
}

std::uint16_t pick_free_port(const std::string& host, std::string& error) {
  addr_list addrs;
  if (error = resolve(host, 0, AI_PASSIVE, addrs); !error.empty()) return 0;
  fd_guard s{::socket(addrs.head->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (s.fd < 0 || ::bind(s.fd, addrs.head->ai_addr, addrs.head->ai_addrlen) != 0 ||
      ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    error = std::strerror(errno);
    return 0;
  }
  const auto port = bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port;
  return ntohs(port);
}

}  // namespace cloud::pubsub
