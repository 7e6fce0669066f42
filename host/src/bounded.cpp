#include "bounded.hpp"

#include <future>
#include <thread>

namespace cloud::host {
namespace {

// The grace covers a plugin that honours its deadline but needs a moment to return.
constexpr std::chrono::milliseconds shutdown_grace{2000};

template <class T, class F>
std::optional<T> run_until(F work, std::chrono::steady_clock::time_point deadline) {
  std::promise<T> promise;
  auto future = promise.get_future();
  std::thread worker{[work = std::move(work), promise = std::move(promise)]() mutable {
    promise.set_value(work());
  }};
  if (future.wait_until(deadline) != std::future_status::ready) {
    worker.detach();
    return std::nullopt;
  }
  worker.join();
  return future.get();
}

}  // namespace

std::optional<plugin_api::status> mount_bounded(plugin_api::plugin& plugin,
                                                plugin_api::host_services& services,
                                                std::chrono::steady_clock::time_point deadline) {
  return run_until<plugin_api::status>([&plugin, &services] { return plugin.mount(services); },
                                       deadline);
}

bool shutdown_bounded(plugin_api::plugin& plugin, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline + shutdown_grace;
  return run_until<bool>(
             [&plugin, deadline] {
               plugin.shutdown(deadline);
               return true;
             },
             until)
      .has_value();
}

}  // namespace cloud::host
