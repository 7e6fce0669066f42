#include "application.hpp"

#include <thread>

#include "bounded.hpp"
#include "log.hpp"

namespace cloud::host {
namespace {

// Each plugin's. nats-server stops its JetStream consumers one after another, about 10 ms each
// (1,000 took 10.4 s), and pubsub kills it when this runs out.
constexpr std::chrono::milliseconds shutdown_deadline{30000};

}  // namespace

std::string format_ms(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                               : std::to_string(d.count()) + "ms";
}

application::application(manifest::apps apps, std::filesystem::path plugin_dir,
                         std::chrono::milliseconds startup_timeout)
    : apps_{std::move(apps)}, plugin_dir_{std::move(plugin_dir)}, startup_timeout_{startup_timeout} {
  slots_.resize(apps_.rows.size());
}

application::~application() { shutdown_all(); }

row_state application::state(std::size_t index) const {
  const std::lock_guard lock{mutex_};
  return slots_.at(index).state;
}

std::string application::mount_one(std::size_t index, std::chrono::steady_clock::time_point deadline,
                                   bool& overran) {
  const auto& row = apps_.rows[index];
  const auto label = manifest::row_label(index, row.name);
  auto& s = slots_[index];
  s.services->set_deadline(deadline);
  const auto started = std::chrono::steady_clock::now();
  const auto result = mount_bounded(s.handle->get(), *s.services, deadline);
  if (!result) {
    overran = true;
    return label + ": mount did not finish within the startup window (CLOUD_STARTUP_TIMEOUT=" +
           format_ms(startup_timeout_) + "); raise CLOUD_STARTUP_TIMEOUT or fix what the plugin waits for";
  }
  if (!result->is_ok()) return label + ": " + result->message();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  log_line("cloud", "mounted " + row.name + " (" + label + ") in " + std::to_string(took.count()) + " ms");
  return {};
}

application::boot_result application::boot() {
  const auto deadline = std::chrono::steady_clock::now() + startup_timeout_;
  for (std::size_t i = 0; i < apps_.rows.size(); ++i) {
    const auto& row = apps_.rows[i];
    auto loaded = load_plugin(row, plugin_dir_);
    if (!loaded.handle) {
      shutdown_all();
      return {loaded.error, false};
    }
    log_line("cloud", "loaded " + (plugin_dir_ / row.library).string() + " for " +
                          manifest::row_label(i, row.name));
    {
      const std::lock_guard lock{mutex_};
      slots_[i].services = std::make_unique<row_services>(row.name, registry_, deadline);
      slots_[i].handle = std::move(loaded.handle);
      slots_[i].state = row.eager ? row_state::mounting : row_state::loaded;
    }
    if (!row.eager) continue;
    bool overran = false;
    auto error = mount_one(i, deadline, overran);
    if (!error.empty()) {
      {
        const std::lock_guard lock{mutex_};
        slots_[i].state = overran ? row_state::mounting : row_state::failed;
      }
      if (!overran) shutdown_bounded(slots_[i].handle->get(), shutdown_deadline);  // undo a partial mount
      shutdown_all();
      return {error, overran};
    }
    const std::lock_guard lock{mutex_};
    slots_[i].state = row_state::mounted;
  }
  return {};
}

void application::shutdown_all() {
  for (std::size_t i = slots_.size(); i-- > 0;) {
    std::unique_ptr<plugin_handle> handle;
    {
      const std::lock_guard lock{mutex_};
      auto& s = slots_[i];
      if (s.state == row_state::mounting) {
        // A mount still runs on another thread: neither shut down nor unload under it.
        (void)s.handle.release();
        continue;
      }
      const bool was_mounted = s.state == row_state::mounted;
      s.state = row_state::unloaded;
      handle = std::move(s.handle);
      if (!was_mounted) continue;  // unloaded below when handle goes out of scope
    }
    const auto& name = apps_.rows[i].name;
    log_line("cloud", "shutting down " + name);
    if (!shutdown_bounded(handle->get(), shutdown_deadline)) {
      log_line("cloud", name + " did not shut down within " + format_ms(shutdown_deadline) +
                            "; leaving it loaded");
      (void)handle.release();
      continue;
    }
    log_line("cloud", "stopped " + name);
  }
}

void application::mount_lazy(std::size_t index, std::function<void(std::string)> done) {
  {
    const std::lock_guard lock{mutex_};
    auto& s = slots_.at(index);
    if (s.state == row_state::mounted || s.state == row_state::failed || !s.handle) {
      const auto error = s.state == row_state::mounted ? std::string{}
                         : s.error.empty()             ? "the host is shutting down"
                                                       : s.error;
      done(error);
      return;
    }
    s.waiters.push_back(std::move(done));
    if (s.state == row_state::mounting) return;  // the first request already started it
    s.state = row_state::mounting;
    ++lazy_in_flight_;
  }
  log_line("cloud", "mounting lazy row " + apps_.rows[index].name + " on first request");
  std::thread{[this, index] {
    bool overran = false;
    auto error = mount_one(index, std::chrono::steady_clock::now() + startup_timeout_, overran);
    finish_lazy(index, std::move(error), overran);
  }}.detach();
}

bool application::wait_lazy_mounts(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock{mutex_};
  const bool settled = lazy_done_.wait_until(lock, deadline, [this] { return lazy_in_flight_ == 0; });
  return settled && !lazy_abandoned_;
}

void application::finish_lazy(std::size_t index, std::string error, bool overran) {
  std::vector<std::function<void(std::string)>> waiters;
  {
    const std::lock_guard lock{mutex_};
    auto& s = slots_[index];
    s.state = error.empty() ? row_state::mounted : overran ? row_state::mounting : row_state::failed;
    s.error = error;
    waiters.swap(s.waiters);
    --lazy_in_flight_;
    if (overran) lazy_abandoned_ = true;  // its plugin code still runs on a detached thread
  }
  lazy_done_.notify_all();
  if (!error.empty()) {
    log_line("cloud", error);
    registry_.report_degraded(apps_.rows[index].name, error);
  }
  for (auto& w : waiters) w(error);
}

}  // namespace cloud::host
