#include "services.hpp"

#include <algorithm>
#include <cstdlib>

#include "log.hpp"

namespace cloud::host {

void registry::publish(const std::string& capability, std::string key, std::string value) {
  const std::lock_guard lock{mutex_};
  values_[{capability, std::move(key)}] = std::move(value);
}

std::optional<std::string> registry::lookup(const std::string& capability, const std::string& key) const {
  const std::lock_guard lock{mutex_};
  const auto it = values_.find({capability, key});
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void registry::report_degraded(const std::string& service, std::string reason) {
  const std::lock_guard lock{mutex_};
  const auto it = std::find_if(degraded_.begin(), degraded_.end(),
                               [&](const auto& d) { return d.service == service; });
  if (it != degraded_.end()) {
    it->reason = std::move(reason);
  } else {
    degraded_.push_back({service, std::move(reason)});
  }
}

void registry::clear_degraded(const std::string& service) {
  const std::lock_guard lock{mutex_};
  std::erase_if(degraded_, [&](const auto& d) { return d.service == service; });
}

std::vector<degraded_report> registry::degraded() const {
  const std::lock_guard lock{mutex_};
  return degraded_;
}

std::optional<std::string> row_services::config(std::string_view variable) const noexcept {
  try {
    const char* value = std::getenv(std::string{variable}.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string{value};
  } catch (...) {
    return std::nullopt;
  }
}

void row_services::log(plugin_api::log_level level, std::string_view message) noexcept {
  try {
    switch (level) {
      case plugin_api::log_level::info: log_line(name_, message); break;
      case plugin_api::log_level::warning: log_line(name_, "warning: " + std::string{message}); break;
      case plugin_api::log_level::error: log_line(name_, "error: " + std::string{message}); break;
    }
  } catch (...) {
  }
}

void row_services::publish(std::string_view key, std::string_view value) noexcept {
  try {
    registry_.publish(name_, std::string{key}, std::string{value});
  } catch (...) {
    log_line(name_, "error: could not record a published value (out of memory)");
  }
}

std::optional<std::string> row_services::lookup(std::string_view capability,
                                                std::string_view key) const noexcept {
  try {
    return registry_.lookup(std::string{capability}, std::string{key});
  } catch (...) {
    return std::nullopt;
  }
}

void row_services::report_degraded(std::string_view reason) noexcept {
  try {
    log_line("cloud", name_ + " degraded: " + std::string{reason});
    registry_.report_degraded(name_, std::string{reason});
  } catch (...) {
  }
}

void row_services::report_recovered() noexcept {
  try {
    log_line("cloud", name_ + " recovered");
    registry_.clear_degraded(name_);
  } catch (...) {
  }
}

std::chrono::steady_clock::time_point row_services::startup_deadline() const noexcept {
  return deadline_;
}

}  // namespace cloud::host
