#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "child_process.hpp"

using namespace cloud::pubsub;
using namespace std::chrono_literals;

namespace {

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

}  // namespace

TEST_CASE("a missing binary is reported by start, naming it") {
  child_process child;
  const auto error = child.start("/nonexistent/nats-server", {}, {}, {});
  CHECK(error == "cannot execute /nonexistent/nats-server: No such file or directory");
  CHECK_FALSE(child.running());
}

TEST_CASE("an unexpected exit is reported with its status and the output tail is kept") {
  child_process child;
  std::atomic<bool> reported{false};
  std::string how;
  REQUIRE(child.start("/bin/sh", {"-c", "echo first; echo '[ERR] broken' >&2; exit 3"},
                      [&](const std::string& d) {
                        how = d;
                        reported = true;
                      },
                      {}) == "");
  REQUIRE(eventually([&] { return reported.load(); }));
  CHECK(how == "exited with status 3");
  CHECK(child.exit_description() == "exited with status 3");
  CHECK(child.output_tail() == "first\n[ERR] broken\n");
}

TEST_CASE("stop terminates a running child with TERM and does not report it as unexpected") {
  child_process child;
  std::atomic<bool> reported{false};
  REQUIRE(child.start("/bin/sleep", {"30"}, [&](const std::string&) { reported = true; }, {}) == "");
  const auto pid = child.pid();
  CHECK(child.running());
  child.stop(2000ms);
  CHECK_FALSE(child.running());
  CHECK(child.exit_description() == "killed by signal 15 (Terminated)");
  CHECK_FALSE(reported);
  CHECK(::kill(pid, 0) != 0);  // reaped: the pid no longer exists
  child.stop(2000ms);          // idempotent
}

TEST_CASE("stop escalates to KILL after the grace when TERM is ignored") {
  child_process child;
  REQUIRE(child.start("/bin/sh", {"-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, {}, {}) == "");
  REQUIRE(eventually([&] { return child.output_tail() == "ready\n"; }));
  const auto started = std::chrono::steady_clock::now();
  child.stop(300ms);
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK(child.exit_description() == "killed by signal 9 (Killed)");
}

TEST_CASE("the child runs in its own process group") {
  child_process child;
  REQUIRE(child.start("/bin/sleep", {"30"}, {}, {}) == "");
  CHECK(::getpgid(child.pid()) == child.pid());
  child.stop(2000ms);
}
