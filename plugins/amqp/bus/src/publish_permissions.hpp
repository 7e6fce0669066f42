#pragma once
// What the server lets a signed-in client's user publish, as its $SYS.REQ.USER.INFO service
// (which every account imports) says. A message is stored under the subjects of the queues it
// reaches, not under its exchange's (`amqp.<exchange>.<key>`), so the server never judges that
// subject: the client judges it here, by the server's own permissions and rules. Thread-safe.
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/expected.hpp"

namespace amqp::bus::detail {

inline constexpr const char* user_info_subject = "$SYS.REQ.USER.INFO";

struct subject_permission {
  std::vector<std::string> allow;  // empty: every subject not denied
  std::vector<std::string> deny;
};

// As nats-server decides a publish (client.go, pubAllowedFullCheck): a non-empty allow list must
// match the subject, and then no deny entry may.
bool permits(const subject_permission& p, std::string_view subject);

// The publish permissions in a $SYS.REQ.USER.INFO answer (`data.permissions.publish`; absent: the
// user may publish everything), or why the answer is not one.
expected<subject_permission, std::string> publish_permission_of(std::string_view answer);

class publish_permissions {
 public:
  using clock = std::chrono::steady_clock;
  // A configuration reload changes a connected user's permissions without telling its client, so
  // an answer older than this is asked again.
  static constexpr std::chrono::seconds trusted_for{10};

  enum class verdict { allowed, denied, unknown };
  struct judgement {
    verdict is = verdict::unknown;
    std::string why_unknown;  // for verdict::unknown: why the server did not say
  };

  void learn(subject_permission p, clock::time_point at = clock::now());
  // The server did not say. A refusal to say replaces what it said before (the user lost the
  // right to ask); anything else (a timeout, a reconnection) keeps an earlier answer.
  void not_told(std::string why, bool refused, clock::time_point at = clock::now());
  judgement judge(std::string_view subject) const;
  bool stale(clock::time_point now = clock::now()) const;

 private:
  mutable std::mutex mutex_;
  std::optional<subject_permission> known_;
  std::string why_unknown_ = "not asked yet";
  clock::time_point asked_at_{};
};

}  // namespace amqp::bus::detail
