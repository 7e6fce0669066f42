#pragma once
// A connection's bytes: its TCP socket, or TLS over it (the amqps listener). The session reads
// and writes through this alike; a TLS connection ends with close_notify (end_tls) before the
// socket beneath is drained and closed, so that a client tells a clean end from a cut one.
#include "net.hpp"

#include <boost/asio/ssl.hpp>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace amqp::server {

namespace ssl = net::ssl;

class connection_stream {
 public:
  explicit connection_stream(tcp::socket socket);
  connection_stream(tcp::socket socket, ssl::context& tls);

  tcp::socket& socket();
  bool tls() const { return std::holds_alternative<ssl::stream<tcp::socket>>(stream_); }
  // The TLS server handshake (nothing for plain TCP); the session's handshake deadline bounds it.
  awaitable<void> handshake(error_code& ec);
  awaitable<std::size_t> read_some(net::mutable_buffer buffer, error_code& ec);
  awaitable<void> write(const std::vector<net::const_buffer>& buffers, error_code& ec);
  // TLS: stops the pending read, sends close_notify and reads (dropping it) what the peer still
  // sends until its close_notify or EOF; the caller bounds it by closing the socket. Plain TCP:
  // nothing.
  awaitable<void> end_tls(error_code& ec);
  // After the handshake: the common name of the client certificate the listener verified
  // (CLOUD_AMQPS_CA); empty when there is none (plain TCP, or no CA asked for one).
  std::string verified_peer_name();

 private:
  std::variant<tcp::socket, ssl::stream<tcp::socket>> stream_;
};

// The amqps listener's TLS: its certificate chain and key, TLS 1.2 and later, and with `ca_file`
// client certificates required and verified against it.
struct tls_files {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;  // empty: no client certificates asked for
};
// The context, or the sentence that refuses the files (naming the variable and the cause).
std::variant<std::shared_ptr<ssl::context>, std::string> make_tls_context(const tls_files& files);

}  // namespace amqp::server
