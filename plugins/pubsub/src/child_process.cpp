#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>

namespace cloud::pubsub {
namespace {

constexpr std::size_t tail_lines = 20;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Between fork and exec only async-signal-safe calls: everything is prepared beforehand.
[[noreturn]] void exec_child(const char* binary, char* const argv[], int output_fd, int status_fd,
                             pid_t parent) {
  ::setpgid(0, 0);  // the terminal's SIGINT goes to the host, which stops the child in order
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // SIG_IGN would survive exec
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(output_fd, 1);
  ::dup2(output_fd, 2);
  ::execv(binary, argv);
  const int error = errno;
  [[maybe_unused]] auto n = ::write(status_fd, &error, sizeof error);
  ::_exit(127);
}

std::string describe(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return "exited with status " + std::to_string(info.si_status);
  return "killed by signal " + std::to_string(info.si_status) + " (" + ::strsignal(info.si_status) + ")";
}

}  // namespace

std::string child_process::start(const std::filesystem::path& binary,
                                 const std::vector<std::string>& args, exit_fn on_exit,
                                 line_fn on_line) {
  on_exit_ = std::move(on_exit);
  on_line_ = std::move(on_line);
  std::vector<std::string> storage{binary.string()};
  storage.insert(storage.end(), args.begin(), args.end());
  std::promise<std::string> started;
  auto result = started.get_future();
  supervisor_ = std::thread{[this, storage = std::move(storage), started = std::move(started)]() mutable {
    std::vector<char*> argv;
    for (auto& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);
    int output[2] = {-1, -1};
    int status[2] = {-1, -1};
    if (::pipe2(output, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
      started.set_value(std::string{"pipe: "} + std::strerror(errno));
      close_fd(output[0]);
      close_fd(output[1]);
      return;
    }
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) exec_child(argv[0], argv.data(), output[1], status[1], parent);
    close_fd(output[1]);
    close_fd(status[1]);
    if (pid < 0) {
      started.set_value(std::string{"fork: "} + std::strerror(errno));
      close_fd(output[0]);
      close_fd(status[0]);
      return;
    }
    int exec_error = 0;
    const auto n = ::read(status[0], &exec_error, sizeof exec_error);  // 0 bytes: exec succeeded
    close_fd(status[0]);
    if (n == sizeof exec_error) {
      ::waitpid(pid, nullptr, 0);
      close_fd(output[0]);
      started.set_value("cannot execute " + storage[0] + ": " + std::strerror(exec_error));
      return;
    }
    {
      const std::lock_guard lock{mutex_};
      pid_ = pid;
    }
    started.set_value({});
    supervise(output[0]);
  }};
  auto error = result.get();
  if (!error.empty()) supervisor_.join();
  return error;
}

void child_process::remember_line(std::string line) {
  if (on_line_ && (line.find("[ERR]") != std::string::npos || line.find("[FTL]") != std::string::npos)) {
    on_line_(line);
  }
  const std::lock_guard lock{mutex_};
  tail_.push_back(std::move(line));
  if (tail_.size() > tail_lines) tail_.pop_front();
}

void child_process::supervise(int output_fd) {
  char buffer[4096];
  for (;;) {
    const auto n = ::read(output_fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child (and anything holding its output) is gone
    partial_.append(buffer, static_cast<std::size_t>(n));
    for (auto nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n')) {
      remember_line(partial_.substr(0, nl));
      partial_.erase(0, nl + 1);
    }
  }
  if (!partial_.empty()) remember_line(std::move(partial_));
  ::close(output_fd);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  bool report = false;
  std::string description = describe(info);
  {
    const std::lock_guard lock{mutex_};
    exited_ = true;
    exit_description_ = description;
    report = !stopping_;
  }
  ::waitpid(pid_, nullptr, 0);  // reap only now that nobody will signal this pid
  changed_.notify_all();
  if (report && on_exit_) on_exit_(description);
}

bool child_process::stop(std::chrono::milliseconds grace) {
  std::unique_lock lock{mutex_};
  bool on_term = true;
  if (pid_ > 0 && !exited_) {
    stopping_ = true;
    ::kill(pid_, SIGTERM);
    if (!changed_.wait_for(lock, grace, [this] { return exited_; })) {
      ::kill(pid_, SIGKILL);
      on_term = false;
      changed_.wait_for(lock, std::chrono::seconds{5}, [this] { return exited_; });
    }
  }
  stopping_ = true;
  lock.unlock();
  if (supervisor_.joinable()) supervisor_.join();
  return on_term;
}

bool child_process::running() const {
  const std::lock_guard lock{mutex_};
  return pid_ > 0 && !exited_;
}

pid_t child_process::pid() const {
  const std::lock_guard lock{mutex_};
  return pid_;
}

std::optional<std::string> child_process::exit_description() const {
  const std::lock_guard lock{mutex_};
  if (!exited_) return std::nullopt;
  return exit_description_;
}

std::string child_process::output_tail() const {
  const std::lock_guard lock{mutex_};
  std::string out;
  for (const auto& line : tail_) out += line + "\n";
  return out;
}

}  // namespace cloud::pubsub
