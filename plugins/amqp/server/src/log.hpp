#pragma once
// The server logs through the host (host_services::log); sessions and the listener get this
// callable so they need not know about the plugin ABI beyond the level enum.
#include <functional>
#include <string_view>

#include "plugin_api/host_services.hpp"

namespace amqp::server {

using log_level = cloud::plugin_api::log_level;
using log_fn = std::function<void(log_level, std::string_view)>;

}  // namespace amqp::server
