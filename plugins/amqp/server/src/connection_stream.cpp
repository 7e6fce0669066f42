#include "connection_stream.hpp"

#include <openssl/err.h>

namespace amqp::server {

connection_stream::connection_stream(tcp::socket socket) : stream_(std::move(socket)) {}

connection_stream::connection_stream(tcp::socket socket, ssl::context& tls)
    : stream_(std::in_place_type<ssl::stream<tcp::socket>>, std::move(socket), tls) {}

tcp::socket& connection_stream::socket() {
  if (auto* secure = std::get_if<ssl::stream<tcp::socket>>(&stream_)) return secure->next_layer();
  return std::get<tcp::socket>(stream_);
}

awaitable<void> connection_stream::handshake(error_code& ec) {
  if (auto* secure = std::get_if<ssl::stream<tcp::socket>>(&stream_))
    co_await secure->async_handshake(ssl::stream_base::server, with_ec(ec));
}

awaitable<std::size_t> connection_stream::read_some(net::mutable_buffer buffer, error_code& ec) {
  if (auto* secure = std::get_if<ssl::stream<tcp::socket>>(&stream_))
    co_return co_await secure->async_read_some(buffer, with_ec(ec));
  co_return co_await std::get<tcp::socket>(stream_).async_read_some(buffer, with_ec(ec));
}

awaitable<void> connection_stream::write(const std::vector<net::const_buffer>& buffers, error_code& ec) {
  if (auto* secure = std::get_if<ssl::stream<tcp::socket>>(&stream_)) {
    co_await net::async_write(*secure, buffers, with_ec(ec));
  } else {
    co_await net::async_write(std::get<tcp::socket>(stream_), buffers, with_ec(ec));
  }
}

awaitable<void> connection_stream::end_tls(error_code& ec) {
  auto* secure = std::get_if<ssl::stream<tcp::socket>>(&stream_);
  if (secure == nullptr) co_return;
  secure->next_layer().cancel(ec);  // a stream takes one read at a time: the session's goes
  co_await secure->async_shutdown(with_ec(ec));
}

std::string connection_stream::verified_peer_name() {
  auto* secure = std::get_if<ssl::stream<tcp::socket>>(&stream_);
  if (secure == nullptr || SSL_get_verify_result(secure->native_handle()) != X509_V_OK) return {};
  X509* peer = SSL_get1_peer_certificate(secure->native_handle());
  if (peer == nullptr) return {};
  std::string name(256, '\0');
  const int length = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, name.data(),
                                               static_cast<int>(name.size()));
  X509_free(peer);
  name.resize(static_cast<std::size_t>(std::max(length, 0)));
  return name;
}

namespace {

// OpenSSL's reason for the last failure, which Asio's message does not always carry.
std::string openssl_reason(const boost::system::system_error& e) {
  std::string why = e.code().message();
  if (auto code = ERR_get_error(); code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    why += " (" + std::string(text) + ")";
  }
  ERR_clear_error();
  return why;
}

}  // namespace

std::variant<std::shared_ptr<ssl::context>, std::string> make_tls_context(const tls_files& files) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  const struct {
    const char* variable;
    const std::string& file;
    const char* expected;
    void (*load)(ssl::context&, const std::string&);
  } steps[] = {
      {"CLOUD_AMQPS_CERT", files.cert_file, "a PEM certificate chain",
       [](ssl::context& c, const std::string& f) { c.use_certificate_chain_file(f); }},
      {"CLOUD_AMQPS_KEY", files.key_file, "the PEM private key of CLOUD_AMQPS_CERT's certificate",
       [](ssl::context& c, const std::string& f) { c.use_private_key_file(f, ssl::context::pem); }},
      {"CLOUD_AMQPS_CA", files.ca_file, "PEM certificates of the CAs that sign client certificates",
       [](ssl::context& c, const std::string& f) { c.load_verify_file(f); }},
  };
  for (const auto& step : steps) {
    if (step.file.empty()) continue;
    try {
      step.load(*context, step.file);
    } catch (const boost::system::system_error& e) {
      return std::string(step.variable) + "='" + step.file + "' is not " + step.expected + ": " + openssl_reason(e);
    }
  }
  if (!files.ca_file.empty()) context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return context;
}

}  // namespace amqp::server
