// cloud: manifest → load → mount → serve → stop.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "application.hpp"
#include "http_server.hpp"
#include "log.hpp"
#include "manifest/manifest.hpp"
#include "options.hpp"
#include "plugin_api/abi.hpp"
#include "plugin_loader.hpp"

#ifndef CLOUD_VERSION
#define CLOUD_VERSION "0.0.0"
#endif

namespace {

namespace fs = std::filesystem;
using namespace cloud::host;

fs::path exe_dir() {
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

int refuse(const std::string& reason) {
  log_line("cloud", reason);
  return 1;
}

// Validates the manifest and each library's handshake without mounting anything.
int check(const cloud::manifest::apps& apps, const fs::path& plugin_dir) {
  int failures = 0;
  for (const auto& row : apps.rows) {
    const auto error = check_library(row, plugin_dir);
    if (error.empty()) {
      log_line("cloud", "check: " + cloud::manifest::row_label(row.index, row.name) + ": ok (" +
                            (plugin_dir / row.library).string() + ")");
    } else {
      log_line("cloud", "check: " + error);
      ++failures;
    }
  }
  log_line("cloud", failures == 0 ? "check: ok" : "check: failed");
  return failures == 0 ? 0 : 1;
}

// A mount is still running on another thread: its plugin cannot be unloaded, so end the
// process without running destructors. The kernel closes every socket; children die with us.
[[noreturn]] void abandon(int code) {
  std::fflush(stderr);
  std::_Exit(code);
}

int serve(const options& opts, const environment& env, cloud::manifest::apps apps) {
  boost::asio::io_context io;
  // Installed before boot so a SIGTERM during boot is held until we can stop in order.
  boost::asio::signal_set signals{io, SIGINT, SIGTERM};
  application app{std::move(apps), opts.plugin_dir, env.startup_timeout};
  log_line("cloud", "booting " + std::to_string(app.apps().rows.size()) + " rows from " +
                        opts.manifest.string() + " (startup window " + format_ms(env.startup_timeout) + ")");
  const auto booted = app.boot();
  if (!booted.error.empty()) {
    log_line("cloud", "boot failed: " + booted.error);
    if (booted.overran) abandon(1);
    return 1;
  }
  http_server http{io, app};
  if (auto error = http.listen(env.http_host, env.http_port); !error.empty()) {
    app.shutdown_all();
    return refuse("boot failed: " + error);
  }
  log_line("cloud", "http listening on http://" + env.http_host + ":" + std::to_string(http.port()) +
                        " (GET /v1/health, /v1/<name>/health)");
  log_line("cloud", "ready");
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    log_line("cloud", std::string{"received "} + (signo == SIGTERM ? "SIGTERM" : "SIGINT") + "; stopping");
    http.stop();
    io.stop();
  });
  io.run();
  // A lazy mount still running would race the shutdown; give it the window it was promised.
  if (!app.wait_lazy_mounts(std::chrono::steady_clock::now() + env.startup_timeout)) {
    app.shutdown_all();  // skips the row still mounting
    log_line("cloud", "stopped (a lazy mount overran and was abandoned)");
    abandon(0);
  }
  app.shutdown_all();
  log_line("cloud", "stopped");
  return 0;
}

// glibc's defaults adapt its mmap and trim thresholds as blocks come and go, so a server that
// allocates and frees a message-sized buffer (64 KiB and up) at a time keeps handing pages back
// to the kernel and faulting them in again (a third of the time of a 64 KiB consume). Fixed
// thresholds keep such buffers in the heap; free memory past 64 MiB still goes back.
void keep_message_buffers_in_the_heap() {
  mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that hangs up is an error code, not a death
  keep_message_buffers_in_the_heap();
  const auto parsed = parse_command_line(std::vector<std::string>(argv + 1, argv + argc), exe_dir());
  if (!parsed.value) return refuse(parsed.error);
  const auto& opts = *parsed.value;
  if (opts.help) {
    std::cout << usage();
    return 0;
  }
  if (opts.version) {
    std::cout << "cloud " << CLOUD_VERSION << " (plugin ABI " << cloud::plugin_api::abi_version
              << ", " << cloud::plugin_api::build_tag << ")\n";
    return 0;
  }
  const auto env = read_environment();
  if (!env.value) return refuse(env.error);
  auto apps = cloud::manifest::load(opts.manifest, {opts.plugin_dir});
  if (!apps) return refuse(apps.error);
  if (opts.check) return check(*apps.value, opts.plugin_dir);
  try {
    return serve(opts, *env.value, std::move(*apps.value));
  } catch (const std::exception& e) {
    return refuse(std::string{"fatal: "} + e.what());
  }
}
