#pragma once
// A bus client on a nats-server of the test's own, and the io_context its callbacks run on.
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>

#include "nats_server.hpp"

namespace amqp::bus::test {

struct bus_harness {
  nats_server server;
  std::shared_ptr<client> bus;
  boost::asio::io_context io;

  // `adjust` changes the client's options before it opens.
  explicit bus_harness(const std::function<void(client_options&)>& adjust = {}) {
    auto o = options_for(server.url());
    if (adjust) adjust(o);
    auto c = client::open(o);
    REQUIRE_MESSAGE(c.ok(), c.error().text);
    bus = *c;
  }
  ~bus_harness() { client::close_and_release(bus, std::chrono::steady_clock::now() + std::chrono::seconds(10)); }
  bus_harness(const bus_harness&) = delete;
  bus_harness& operator=(const bus_harness&) = delete;

  // Runs the io_context until `done()` or the timeout.
  template <class Pred>
  bool run_until(Pred done, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < until) {
      io.run_for(std::chrono::milliseconds(10));
      io.restart();
    }
    return done();
  }
};

}  // namespace amqp::bus::test
