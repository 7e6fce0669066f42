// A plugin for host tests only, steered by environment variables, so that the host's boot,
// lazy-mount, failure and overrun paths can be driven without touching the real plugins.
//   CLOUD_PROBE_MOUNT_MS   sleep this long in mount (an overrun when beyond the window)
//   CLOUD_PROBE_FAIL       fail mount with this message
// It looks up pubsub's URL when pubsub is mounted and logs it, and publishes "mounted".
#include <charconv>
#include <chrono>
#include <string>
#include <thread>

#include "plugin_api/export.hpp"

namespace cloud::tests {

class probe_plugin final : public plugin_api::plugin {
 public:
  std::string_view name() const noexcept override { return "probe"; }

  plugin_api::status mount(plugin_api::host_services& host) noexcept override {
    if (auto ms = host.config("CLOUD_PROBE_MOUNT_MS")) {
      unsigned value = 0;
      std::from_chars(ms->data(), ms->data() + ms->size(), value);
      std::this_thread::sleep_for(std::chrono::milliseconds{value});
    }
    if (auto fail = host.config("CLOUD_PROBE_FAIL")) return plugin_api::status::error(*fail);
    const auto url = host.lookup("pubsub", "url");
    host.log(plugin_api::log_level::info, "probe sees pubsub url " + url.value_or("(none)"));
    host.publish("mounted", "yes");
    return plugin_api::status::ok();
  }

  void shutdown(std::chrono::milliseconds) noexcept override {}
};

}  // namespace cloud::tests

CLOUD_PLUGIN(cloud::tests::probe_plugin)
