#pragma once
// The host's side of plugin_api::host_services: one `row_services` per manifest row, all
// sharing one `registry` of published values and degraded reports.
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "plugin_api/host_services.hpp"

namespace cloud::host {

struct degraded_report {
  std::string service;
  std::string reason;
};

class registry {
 public:
  void publish(const std::string& capability, std::string key, std::string value);
  std::optional<std::string> lookup(const std::string& capability, const std::string& key) const;
  // The latest reason per service; a service reported twice keeps its newest reason.
  void report_degraded(const std::string& service, std::string reason);
  void clear_degraded(const std::string& service);
  std::vector<degraded_report> degraded() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::string> values_;
  std::vector<degraded_report> degraded_;
};

class row_services final : public plugin_api::host_services {
 public:
  row_services(std::string name, registry& shared, std::chrono::steady_clock::time_point deadline)
      : name_{std::move(name)}, registry_{shared}, deadline_{deadline} {}

  std::optional<std::string> config(std::string_view variable) const noexcept override;
  void log(plugin_api::log_level level, std::string_view message) noexcept override;
  void publish(std::string_view key, std::string_view value) noexcept override;
  std::optional<std::string> lookup(std::string_view capability,
                                    std::string_view key) const noexcept override;
  void report_degraded(std::string_view reason) noexcept override;
  void report_recovered() noexcept override;
  std::chrono::steady_clock::time_point startup_deadline() const noexcept override;

  // A lazy row's window starts at the request that mounts it.
  void set_deadline(std::chrono::steady_clock::time_point deadline) noexcept { deadline_ = deadline; }

 private:
  std::string name_;
  registry& registry_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace cloud::host
