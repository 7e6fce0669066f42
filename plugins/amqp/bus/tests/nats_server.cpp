#include "nats_server.hpp"

#include <arpa/inet.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace amqp::bus::test {

namespace {

std::filesystem::path make_temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "amqp-bus-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// CLOUD_TEST_NATS_SERVER when set (the `.floor` twins point it at the floor server), else the
// pinned server this build was configured with (cmake/NatsServer.cmake).
std::string server_binary() {
  const char* chosen = std::getenv("CLOUD_TEST_NATS_SERVER");
  return chosen && *chosen ? chosen : CLOUD_TEST_NATS_SERVER_DEFAULT;
}

std::string read_client_url(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ports") continue;
    std::ifstream in(entry.path());
    auto ports = nlohmann::json::parse(in, nullptr, false);
    if (ports.is_object() && ports.contains("nats") && !ports["nats"].empty())
      return ports["nats"][0].get<std::string>();
  }
  return {};
}

}  // namespace

nats_server::nats_server(bool jetstream) : dir_(make_temp_dir()) {
  std::vector<std::string> args = {server_binary(), "-a", "127.0.0.1", "-p", "-1",
                                   "--ports_file_dir", dir_.string(), "-l", (dir_ / "server.log").string()};
  if (jetstream) {
    args.insert(args.end(), {"-js", "-sd", (dir_ / "store").string()});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start nats-server " + args[0]);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (url_.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      url_ = read_client_url(dir_);
    } catch (const std::exception&) {
    }
  }
  if (url_.empty()) throw std::runtime_error("nats-server did not report its port");
  // Ready once JetStream answers (or, without it, once a client connects).
  for (;;) {
    natsConnection* nc = nullptr;
    if (natsConnection_ConnectTo(&nc, url_.c_str()) == NATS_OK) {
      natsConnection_Destroy(nc);
      break;
    }
    if (std::chrono::steady_clock::now() > until) throw std::runtime_error("nats-server not accepting");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

nats_server::~nats_server() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 250 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

nlohmann::json nats_server::api(const std::string& api_subject, const nlohmann::json& body) const {
  natsConnection* nc = nullptr;
  if (natsConnection_ConnectTo(&nc, url_.c_str()) != NATS_OK) throw std::runtime_error("test connect failed");
  const std::string payload = body.is_null() ? std::string{} : body.dump();
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_Request(&reply, nc, ("$JS.API." + api_subject).c_str(), payload.data(),
                                        static_cast<int>(payload.size()), 5000);
  nlohmann::json out;
  if (s == NATS_OK)
    out = nlohmann::json::parse(natsMsg_GetData(reply), natsMsg_GetData(reply) + natsMsg_GetDataLength(reply));
  else
    out = {{"request_failed", natsStatus_GetText(s)}};
  natsMsg_Destroy(reply);
  natsConnection_Destroy(nc);
  return out;
}

client_options options_for(const std::string& url, std::chrono::milliseconds budget) {
  client_options o;
  o.url = url;
  o.deadline = std::chrono::steady_clock::now() + budget;
  return o;
}

int dead_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace amqp::bus::test
