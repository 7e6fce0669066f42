#pragma once
// The manifest's rows brought to life: load in row order, mount eager rows inside the startup
// window, mount lazy rows on demand, shut down in reverse order.
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "manifest/manifest.hpp"
#include "plugin_loader.hpp"
#include "services.hpp"

namespace cloud::host {

enum class row_state { unloaded, loaded, mounting, mounted, failed };

class application {
 public:
  application(manifest::apps apps, std::filesystem::path plugin_dir,
              std::chrono::milliseconds startup_timeout);
  ~application();

  struct boot_result {
    std::string error;     // empty on success; "row N (name): ..." otherwise
    bool overran = false;  // a mount is still running: the process must end without unloading
  };
  // Loads every row's library in order and mounts the eager rows. On failure, whatever
  // mounted has been shut down in reverse order.
  boot_result boot();

  // Reverse manifest order, each bounded. Idempotent.
  void shutdown_all();

  // Mounts a lazy row on a thread of its own; `done` runs on that thread with "" or the
  // reason. Rows already mounted (or failed) answer at once.
  void mount_lazy(std::size_t index, std::function<void(std::string)> done);

  // Waits until no lazy mount is in flight; false when one still runs at `deadline` (it
  // overran: the process must then end without unloading, see main.cpp).
  bool wait_lazy_mounts(std::chrono::steady_clock::time_point deadline);

  const manifest::apps& apps() const noexcept { return apps_; }
  const registry& shared() const noexcept { return registry_; }
  registry& shared() noexcept { return registry_; }
  row_state state(std::size_t index) const;

 private:
  struct slot {
    std::unique_ptr<row_services> services;
    std::unique_ptr<plugin_handle> handle;
    row_state state = row_state::unloaded;
    std::string error;
    std::vector<std::function<void(std::string)>> waiters;
  };

  std::string mount_one(std::size_t index, std::chrono::steady_clock::time_point deadline,
                        bool& overran);
  void finish_lazy(std::size_t index, std::string error, bool overran);

  manifest::apps apps_;
  std::filesystem::path plugin_dir_;
  std::chrono::milliseconds startup_timeout_;
  registry registry_;
  mutable std::mutex mutex_;  // guards slot state and waiters (lazy mounts race HTTP reads)
  std::vector<slot> slots_;
  std::condition_variable lazy_done_;
  int lazy_in_flight_ = 0;        // guarded by mutex_
  bool lazy_abandoned_ = false;  // guarded by mutex_
};

std::string format_ms(std::chrono::milliseconds d);

}  // namespace cloud::host
