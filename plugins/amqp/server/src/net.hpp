#pragma once
// Asio defaults for the server, in the one header that brings Asio in.
// Boost 1.74 is Asio 1.18: no as_tuple, no cancellation slots, no awaitable operators, so
// operations report through redirect_error and deadlines are timers that close the socket.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>

namespace amqp::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using clock = std::chrono::steady_clock;

template <class T = void>
using awaitable = net::awaitable<T>;

// The completion token of every awaited operation: failures land in `ec`, never as throws.
inline auto with_ec(error_code& ec) { return net::redirect_error(net::use_awaitable, ec); }

}  // namespace amqp::server
