// Publish completions handed from other threads to the executors that asked for them.
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "completion_queue.hpp"
#include "error.hpp"

using namespace amqp::bus;
using namespace amqp::bus::detail;

TEST_CASE("completion_queue: every completion runs once, on its executor, in queued order") {
  boost::asio::io_context io;
  auto a = boost::asio::make_strand(io);
  auto b = boost::asio::make_strand(io);
  auto queue = std::make_shared<completion_queue>();
  std::vector<int> on_a, on_b;
  int failures = 0;
  constexpr int each = 1000;
  std::thread producer([&] {  // as the nats thread does
    for (int i = 0; i < each; ++i) {
      queue->post(a, [&on_a, i](bus_status) { on_a.push_back(i); }, bus_ok());
      queue->post(b, [&on_b, &failures, i](bus_status s) {
        on_b.push_back(i);
        if (!s) ++failures;
      }, i % 2 ? bus_status{bus_ok()} : bus_status{failure("publish", "refused")});
    }
  });
  producer.join();
  io.run();
  REQUIRE(on_a.size() == each);
  REQUIRE(on_b.size() == each);
  for (int i = 0; i < each; ++i) {
    CHECK(on_a[static_cast<std::size_t>(i)] == i);
    CHECK(on_b[static_cast<std::size_t>(i)] == i);
  }
  CHECK(failures == each / 2);  // each status reaches its own completion
}
