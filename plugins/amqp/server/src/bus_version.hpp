#pragma once
// Which nats-server the adaptor mounts on (README, 'Which nats-server'): the oldest release line
// the NATS project supports, from the release that fixed a panic in pinned priority groups
// (single active consumer's). Its consumers take partly overlapping filters, count a
// multi-filter backlog exactly, take pinned groups, and its streams' max_consumers can change;
// the adaptor relies on all four. pubsub publishes the version of the server it launched or
// dialled as "server_version"; mount checks it before dialing the bus. Pure, no I/O.
#include <optional>
#include <string>
#include <string_view>

namespace amqp::server {

// The oldest nats-server the adaptor mounts on.
inline constexpr std::string_view minimum_server_version = "2.14.3";

// MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], as nats-server reports it in INFO ("2.15.2",
// "2.11.0-RC.1"); the build part is ignored.
struct server_version {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned patch = 0;
  std::string prerelease;  // "" for a release
};

// nullopt when `text` is not such a version.
std::optional<server_version> parse_server_version(std::string_view text);

// Semantic-versioning order: negative, zero or positive. A prerelease comes before its release
// (2.14.3-RC.1 < 2.14.3); prereleases of one release compare as text.
int compare(const server_version& a, const server_version& b);

// nullopt when `published` (pubsub's "server_version"; nullopt when it published none) is at
// least minimum_server_version; otherwise the sentence that refuses the mount, naming the
// server's version (or its absence), the minimum and the remedy.
std::optional<std::string> refuse_server_version(const std::optional<std::string>& published);

}  // namespace amqp::server
