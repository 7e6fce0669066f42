#pragma once
// One line per step to stderr; lines from several threads never interleave.
#include <string_view>

namespace cloud::host {

// `source` is "cloud" for the host itself or a plugin's name ("cloud[pubsub]: ...").
void log_line(std::string_view source, std::string_view message) noexcept;

}  // namespace cloud::host
