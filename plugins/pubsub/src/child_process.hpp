#pragma once
// A child process supervised by a thread of its own. The thread forks (PR_SET_PDEATHSIG is
// tied to the forking thread, so it must outlive the child), keeps the tail of the child's
// output, reaps it, and reports an exit nobody asked for.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cloud::pubsub {

class child_process {
 public:
  // Runs on the supervisor thread when the child exits without stop() having been called.
  using exit_fn = std::function<void(const std::string& description)>;
  // Runs on the supervisor thread for each output line worth the host's log ([ERR], [FTL]).
  using line_fn = std::function<void(const std::string& line)>;

  child_process() = default;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() { stop(std::chrono::milliseconds{2000}); }

  // "" once the child runs; otherwise why it could not (e.g. exec failed: no such file).
  std::string start(const std::filesystem::path& binary, const std::vector<std::string>& args,
                    exit_fn on_exit, line_fn on_line);
  // TERM, then KILL after `grace`; reaps. Bounded and idempotent. False when it had to KILL.
  bool stop(std::chrono::milliseconds grace);

  bool running() const;
  pid_t pid() const;
  // "exited with status 1" / "killed by signal 9"; nullopt while running.
  std::optional<std::string> exit_description() const;
  // The last lines the child wrote to stdout/stderr, newline-separated.
  std::string output_tail() const;

 private:
  void supervise(int output_fd);
  void remember_line(std::string line);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::thread supervisor_;
  pid_t pid_ = -1;
  bool exited_ = false;  // set before the zombie is reaped, so kill() never hits a reused pid
  bool stopping_ = false;
  std::string exit_description_;
  std::deque<std::string> tail_;
  std::string partial_;
  exit_fn on_exit_;
  line_fn on_line_;
};

}  // namespace cloud::pubsub
