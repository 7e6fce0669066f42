#include "pubsub_plugin.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "plugin_api/export.hpp"
#include "probe.hpp"

namespace cloud::pubsub {
namespace {

using plugin_api::status;
using clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// mount gives up this long before the host's deadline, so that it can still clean up (stop
// the child) and return a reason of its own instead of being declared overrun.
constexpr std::chrono::milliseconds return_margin{500};

clock::time_point give_up_at(clock::time_point deadline) { return deadline - return_margin; }

// A restarted server has this long to answer JetStream (it replays its store first).
constexpr std::chrono::seconds restart_ready_window{60};
constexpr std::chrono::milliseconds first_restart_pause{100};
constexpr std::chrono::milliseconds longest_restart_pause{5000};

std::chrono::milliseconds until(clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return std::max(left, std::chrono::milliseconds{0});
}

// Clients dial loopback when the server binds every interface.
std::string dial_host(const std::string& host) {
  if (host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

std::string url_of(const std::string& host, std::uint16_t port) {
  const auto h = dial_host(host);
  return "nats://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

// max_payload, max_pending and the fsync policy are config-file settings (there are no flags
// for them). max_pending is what a connection may have unsent before the server closes it as a
// slow consumer: each amqp consumer may have 16 MiB on its way (amqp::bus pull requests), so the
// default 64 MiB let four consumers of large messages, pulling at once, close the adaptor's.
constexpr std::uint64_t max_pending = 1ULL << 30;

std::string write_server_config(const config& c, fs::path& file) {
  file = c.store_dir / "cloud-pubsub.conf";
  std::ofstream out{file, std::ios::trunc};
  out << "# written by the cloud pubsub plugin at each start\nmax_payload: " << c.max_payload << "\n"
      << "max_pending: " << max_pending << "\n";
  if (c.sync_always) out << "jetstream {\n  sync_interval: always\n}\n";
  // nats-server reads an include's path relative to the including file, even an absolute one.
  if (c.server_config) out << "include \"" << fs::relative(*c.server_config, file.parent_path()).string() << "\"\n";
  out.close();
  if (!out) return "cannot write " + file.string() + "; check CLOUD_PUBSUB_STORE_DIR";
  return {};
}

// The file this plugin was loaded from (dladdr on one of its own functions), made absolute;
// empty when the loader cannot say.
fs::path this_library() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&url_of), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  auto path = fs::absolute(info.dli_fname, ec);
  return ec ? fs::path{} : path;
}

// "nats-server 2.15.2", or what stands in for a version the server did not state.
std::string server_named(const std::string& version) {
  return version.empty() ? "nats-server (version not stated in its INFO)" : "nats-server " + version;
}

}  // namespace

status pubsub_plugin::mount(plugin_api::host_services& host) noexcept {
  try {
    return mount_checked(host);
  } catch (const std::exception& e) {
    return status::error(std::string{"pubsub: unexpected failure: "} + e.what());
  }
}

status pubsub_plugin::mount_checked(plugin_api::host_services& host) {
  const std::lock_guard lock{mutex_};
  host_ = &host;
  auto parsed = read_config([&host](std::string_view v) { return host.config(v); });
  if (!parsed.value) return status::error(parsed.error);
  if (parsed.value->external_url) return use_external(host, *parsed.value);
  return launch(host, std::move(*parsed.value));
}

status pubsub_plugin::use_external(plugin_api::host_services& host, const config& c) {
  const auto& urls = *c.external_url;
  const auto deadline = give_up_at(host.startup_deadline());
  std::string last_error = "no attempt made (the startup window was already over)";
  // A cluster list is reachable when any member answers; retry until the window closes.
  do {
    std::size_t begin = 0;
    while (begin <= urls.size()) {
      const auto end = std::min(urls.find(',', begin), urls.size());
      const auto url = urls.substr(begin, end - begin);
      begin = end + 1;
      const auto where = split_url(url);
      if (!where)
        return status::error("CLOUD_PUBSUB_URL=\"" + redacted(urls) + "\" has a malformed entry \"" + redacted(url) + "\"");
      auto probed = probe_info(where->first, where->second, std::min(until(deadline), std::chrono::milliseconds{2000}));
      if (probed.info) {
        const auto payload = probed.info->max_payload ? probed.info->max_payload : c.max_payload;
        host.publish("url", urls);
        host.publish("max_payload", std::to_string(payload));
        host.publish("embedded", "false");
        // The version of the member that answered (a cluster's members normally agree).
        if (!probed.info->version.empty()) host.publish("server_version", probed.info->version);
        host.log(plugin_api::log_level::info, "using the existing bus at " + redacted(urls) +
                                                  " (CLOUD_PUBSUB_URL; launched nothing), " +
                                                  server_named(probed.info->version) + " at " + redacted(url) +
                                                  ", max_payload " + std::to_string(payload));
        mounted_ = true;
        return status::ok();
      }
      last_error = redacted(url) + ": " + probed.error;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  } while (clock::now() < deadline);
  return status::error("CLOUD_PUBSUB_URL=\"" + redacted(urls) + "\" is not reachable (" + last_error +
                       "); start that server or unset CLOUD_PUBSUB_URL to launch one");
}

status pubsub_plugin::launch(plugin_api::host_services& host, config c) {
  std::optional<fs::path> binary;
  if (c.server_bin) {
    binary = resolve_binary(*c.server_bin, host.config("PATH"));
    if (!binary) {
      return status::error("nats-server not found (NATS_SERVER_BIN=\"" + *c.server_bin +
                           "\"); set NATS_SERVER_BIN to the path of a nats-server, or unset it to "
                           "launch the one shipped in lib/cloud/bin");
    }
  } else {
    const auto library = this_library();
    const auto shipped = library.empty() ? fs::path{} : default_server_binary(library);
    binary = shipped.empty() ? std::nullopt : resolve_binary(shipped.string(), std::nullopt);
    if (!binary) {
      return status::error(
          "nats-server not found at " + (shipped.empty() ? "lib/cloud/bin/nats-server" : shipped.string()) +
          " (NATS_SERVER_BIN is unset: the default is the nats-server shipped beside the plugins, "
          "lib/cloud/bin/nats-server); reinstall the cloud package (from a build tree: build target "
          "cloud_package_contents), or set NATS_SERVER_BIN to a nats-server's path");
    }
  }
  std::error_code ec;
  fs::create_directories(c.store_dir, ec);
  if (ec) {
    return status::error("cannot create the JetStream store " + c.store_dir.string() + ": " + ec.message() +
                         "; set CLOUD_PUBSUB_STORE_DIR or CLOUD_DATA_DIR to a writable directory");
  }
  if (c.port == 0) {
    std::string error;
    c.port = pick_free_port(c.host, error);
    if (c.port == 0) return status::error("CLOUD_PUBSUB_PORT=0: no free port on " + c.host + ": " + error);
  } else if (auto taken = claim_port(c.host, c.port); !taken.empty()) {
    return status::error("CLOUD_PUBSUB_PORT=" + std::to_string(c.port) + ": cannot bind " + c.host + ":" +
                         std::to_string(c.port) + " (" + taken +
                         "); stop what holds it, set CLOUD_PUBSUB_PORT (0 picks a free port) or point "
                         "CLOUD_PUBSUB_URL at a running server");
  }
  fs::path conf;
  if (auto e = write_server_config(c, conf); !e.empty()) return status::error(e);
  std::vector<std::string> args{"-js", "-a", c.host, "-p", std::to_string(c.port), "-sd", c.store_dir.string(),
                                "-c", conf.string()};
  spec_ = launch_spec{c, *binary, std::move(args)};
  server_info info;
  if (auto e = start_child(give_up_at(host.startup_deadline()),
                           "within the startup window (CLOUD_STARTUP_TIMEOUT: raise it)", info);
      !e.empty()) {
    spec_.reset();
    return status::error(e);
  }
  const auto url = url_of(c.host, c.port);
  host.publish("url", url);
  if (!c.user.empty()) {
    host.publish("user", c.user);
    host.publish("password", c.password);
  }
  host.publish("max_payload", std::to_string(c.max_payload));
  // A server this process launched died with it if it ever died: no other process can hold
  // deliveries from it (riders use this to reclaim orphaned ones at boot).
  host.publish("embedded", "true");
  if (!info.version.empty()) host.publish("server_version", info.version);
  host.log(plugin_api::log_level::info, "nats-server (pid " + std::to_string(child_->pid()) + ") listening on " +
                                            url + ", " + server_named(info.version) + " (" + binary->string() +
                                            "), JetStream store " + c.store_dir.string() + ", max_payload " +
                                            std::to_string(c.max_payload));
  mounted_ = true;
  restarter_ = std::thread{[this] { restart_loop(); }};
  return status::ok();
}

std::string pubsub_plugin::start_child(clock::time_point deadline, const std::string& window, server_info& info) {
  child_ = std::make_unique<child_process>();
  auto started = child_->start(
      spec_->binary, spec_->args, [this](const std::string& how) { on_child_exit(how); },
      [this](const std::string& line) { host_->log(plugin_api::log_level::warning, "nats-server: " + line); });
  if (!started.empty()) {
    child_.reset();
    return started + "; check NATS_SERVER_BIN";
  }
  if (auto e = wait_ready(deadline, window, info); !e.empty()) {
    const auto message = failure(e);
    child_->stop(std::chrono::milliseconds{200});  // then KILL: a server that failed to start holds nothing
    child_.reset();
    return message;
  }
  return {};
}

std::string pubsub_plugin::wait_ready(clock::time_point deadline, const std::string& window, server_info& info) {
  const auto& c = spec_->c;
  const auto host = dial_host(c.host);
  std::string last = "no attempt made (its window was already over)";
  while (clock::now() < deadline && !stopping_) {
    if (auto how = child_->exit_description()) return "nats-server " + *how + " during startup";
    last = probe_jetstream(host, c.port, std::min(until(deadline), std::chrono::milliseconds{1000}), &info, c.user,
                           c.password);
    if (last.empty()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  return "nats-server did not become ready on " + url_of(c.host, c.port) + " " + window +
         " (last probe: " + last + ")";
}

std::string pubsub_plugin::failure(const std::string& what) const {
  auto tail = child_ ? child_->output_tail() : std::string{};
  // The last few lines say why (e.g. "address already in use"); more is noise in a boot error.
  std::size_t lines = 0;
  auto start = tail.size();
  while (start > 0 && lines < 6) {
    start = tail.rfind('\n', start - 1);
    if (start == std::string::npos) {
      start = 0;
      break;
    }
    ++lines;
  }
  tail = tail.substr(start);
  return tail.empty() ? what : what + "; nats-server's last output:\n" + tail;
}

// ---- restarts ------------------------------------------------------------------------------

void pubsub_plugin::on_child_exit(const std::string& how) {
  if (!mounted_) return;  // an exit during mount is mount's to report
  const auto restarts = spec_->c.restarts;
  host_->report_degraded("nats-server " + how + "; the bus is gone" +
                         (restarts == 0 ? std::string{" (CLOUD_PUBSUB_RESTARTS=0: not restarted)"}
                                        : std::string{", restarting it"}));
  if (restarts == 0) return;
  const std::lock_guard lock{restart_mutex_};
  died_ = how;
  restart_wake_.notify_all();
}

void pubsub_plugin::restart_loop() {
  for (;;) {
    std::string how;
    {
      std::unique_lock lock{restart_mutex_};
      restart_wake_.wait(lock, [this] { return stopping_ || died_; });
      if (stopping_) return;
      how = std::move(*died_);
      died_.reset();
    }
    restart(how);
  }
}

bool pubsub_plugin::pause_before_restart(std::chrono::milliseconds pause) {
  std::unique_lock lock{restart_mutex_};
  return !restart_wake_.wait_for(lock, pause, [this] { return stopping_.load(); });
}

void pubsub_plugin::restart(const std::string& how) {
  const std::lock_guard lock{mutex_};
  const auto old_pid = child_ ? child_->pid() : -1;
  child_.reset();  // reaped already; this joins its supervisor thread
  const auto attempts = spec_->c.restarts;
  auto pause = first_restart_pause;
  std::string last;
  for (unsigned attempt = 1; attempt <= attempts; ++attempt) {
    if (!pause_before_restart(pause)) return;
    pause = std::min(pause * 2, longest_restart_pause);
    server_info info;
    last = start_child(clock::now() + restart_ready_window,
                       "within a restart's " + std::to_string(restart_ready_window.count()) + " s", info);
    {
      // A child that died while starting was reaped inside start_child, its exit reported by
      // then: this attempt has answered for it.
      const std::lock_guard wake{restart_mutex_};
      died_.reset();
    }
    if (stopping_) return;
    if (last.empty()) {
      host_->log(plugin_api::log_level::info, "nats-server (pid " + std::to_string(old_pid) + ") " + how +
                                                  "; restarted it as pid " + std::to_string(child_->pid()) +
                                                  " on the same port and store");
      host_->report_recovered();
      return;
    }
    host_->log(plugin_api::log_level::warning, "restart " + std::to_string(attempt) + " of " +
                                                   std::to_string(attempts) + " of nats-server failed: " + last);
  }
  host_->report_degraded("nats-server " + how + "; the bus is gone: gave up after " + std::to_string(attempts) +
                         " restarts in a row (CLOUD_PUBSUB_RESTARTS); the last one: " + last);
}

void pubsub_plugin::shutdown(std::chrono::milliseconds deadline) noexcept {
  mounted_ = false;  // an exit from here on is ours, not a degradation
  {
    const std::lock_guard lock{restart_mutex_};
    stopping_ = true;
    restart_wake_.notify_all();
  }
  if (restarter_.joinable()) restarter_.join();
  const std::lock_guard lock{mutex_};
  if (!child_) return;
  const auto pid = child_->pid();
  // Leave time to KILL and reap inside the deadline.
  const auto grace = std::max(deadline - std::chrono::milliseconds{500}, std::chrono::milliseconds{100});
  const bool on_term = child_->stop(grace);
  if (host_ && on_term) host_->log(plugin_api::log_level::info, "nats-server (pid " + std::to_string(pid) + ") stopped");
  if (host_ && !on_term)
    host_->log(plugin_api::log_level::warning,
               "nats-server (pid " + std::to_string(pid) + ") did not stop within " + std::to_string(grace.count()) +
                   " ms of SIGTERM; killed it: it recovers its store at the next start, and acknowledgements it "
                   "had not yet written are delivered again");
  child_.reset();
}

}  // namespace cloud::pubsub

CLOUD_PLUGIN(cloud::pubsub::pubsub_plugin)
