#include "cloud_process.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace cloud::test {
namespace {

std::string env_name(const char* entry) {
  const char* eq = std::strchr(entry, '=');
  return eq ? std::string(entry, eq) : std::string(entry);
}

std::filesystem::path make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "cloud-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  return pattern;
}

}  // namespace

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("binding port 0 failed");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

cloud_process::cloud_process(std::map<std::string, std::string> env, std::chrono::seconds ready_timeout)
    : dir_(make_temp_dir()), log_path_(dir_ / "cloud.log") {
  // The defaults every test wants: nothing shared with another test or a running system.
  std::map<std::string, std::string> vars{
      {"CLOUD_HTTP_PORT", "0"},
      {"CLOUD_DATA_DIR", dir_.string()},
      {"CLOUD_PUBSUB_PORT", std::to_string(free_port())},
      {"CLOUD_PUBSUB_STORE_DIR", (dir_ / "pubsub").string()},
      {"CLOUD_AMQP_PORT", "0"},
  };
  for (auto& [k, v] : env) vars[k] = v;
  pubsub_url_ = vars.count("CLOUD_PUBSUB_URL") ? vars["CLOUD_PUBSUB_URL"]
                                               : "nats://127.0.0.1:" + vars["CLOUD_PUBSUB_PORT"];

  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    const auto name = env_name(*e);
    if (name == "CLOUD_PUBSUB_URL" || vars.count(name)) continue;
    entries.emplace_back(*e);
  }
  for (auto& [k, v] : vars) entries.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::vector<std::string> args{CLOUD_TEST_BIN, "--manifest", CLOUD_TEST_MANIFEST, "--plugin-dir", CLOUD_TEST_PLUGIN_DIR};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a last-resort SIGKILL also reaches the nats-server child.
  sigset_t all;
  sigfillset(&all);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  const int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error(std::string("spawning ") + CLOUD_TEST_BIN + " failed: " + std::strerror(rc));
  }
  try {
    wait_ready(ready_timeout);
  } catch (...) {
    stop(std::chrono::seconds(10));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

cloud_process::~cloud_process() {
  stop();
  if (!std::getenv("CLOUD_TEST_KEEP")) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string cloud_process::log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void cloud_process::wait_ready(std::chrono::seconds timeout) {
  static const std::string marker = "amqp listening on ";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto text = log();
    if (auto at = text.find(marker); at != std::string::npos) {
      const auto line_end = text.find('\n', at);
      const auto endpoint = text.substr(at + marker.size(), line_end - at - marker.size());
      const auto colon = endpoint.rfind(':');
      if (colon != std::string::npos && line_end != std::string::npos) {
        amqp_port_ = static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1)));
        check_server_version(text);
        return;
      }
    }
    if (wait_exit(std::chrono::milliseconds(50))) {
      throw std::runtime_error("cloud exited with status " + std::to_string(status_) + " before amqp listened:\n" + log());
    }
  }
  throw std::runtime_error("cloud did not log \"amqp listening on\" within " + std::to_string(timeout.count()) +
                           " s:\n" + log());
}

// ctest names the nats-server each test runs on (cmake/Testing.cmake: NATS_SERVER_VERSION, the
// pinned one's or, in a `.floor` twin, the floor's): pubsub's startup line must name that version,
// or the test would pass on a server it does not claim to cover.
void cloud_process::check_server_version(const std::string& text) const {
  const char* expected = std::getenv("NATS_SERVER_VERSION");
  if (expected == nullptr || *expected == '\0') return;
  const std::string launched = ", nats-server " + std::string(expected) + " (";  // embedded
  const std::string dialled = ", nats-server " + std::string(expected) + " at ";  // CLOUD_PUBSUB_URL
  if (text.find(launched) == std::string::npos && text.find(dialled) == std::string::npos) {
    throw std::runtime_error("this test runs on nats-server " + std::string(expected) +
                             " (NATS_SERVER_VERSION), but pubsub's log names another:\n" + text);
  }
}

bool cloud_process::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ < 0) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int cloud_process::stop(std::chrono::seconds grace) {
  if (pid_ < 0) return status_;
  const pid_t group = pid_;
  ::kill(pid_, SIGTERM);
  if (!wait_exit(grace)) {
    ::kill(-group, SIGKILL);
    wait_exit(std::chrono::seconds(10));
  }
  // Whatever cloud started and left behind in its group (a nats-server) goes too.
  ::kill(-group, SIGKILL);
  return status_;
}

}  // namespace cloud::test
