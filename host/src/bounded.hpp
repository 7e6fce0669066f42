#pragma once
// Runs a plugin entry point on a thread of its own so the host can enforce a deadline. A call
// that overruns is left running, detached: its plugin can then never be unloaded safely, so
// callers treat an overrun as fatal for that plugin.
#include <chrono>
#include <optional>

#include "plugin_api/plugin.hpp"

namespace cloud::host {

// nullopt: mount did not return by `deadline`.
std::optional<plugin_api::status> mount_bounded(plugin_api::plugin& plugin,
                                                plugin_api::host_services& services,
                                                std::chrono::steady_clock::time_point deadline);

// false: shutdown did not return within `deadline` plus a short grace.
bool shutdown_bounded(plugin_api::plugin& plugin, std::chrono::milliseconds deadline);

}  // namespace cloud::host
