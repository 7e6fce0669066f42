#include "publish_permissions.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "amqp/subject_match.hpp"

namespace amqp::bus::detail {

namespace {

bool any_matches(const std::vector<std::string>& filters, std::string_view subject) {
  return std::any_of(filters.begin(), filters.end(),
                     [&](const std::string& filter) { return amqp::subject_matches(filter, subject); });
}

std::vector<std::string> subjects_at(const nlohmann::json& side, const char* name) {
  std::vector<std::string> out;
  const auto list = side.find(name);
  if (list == side.end() || !list->is_array()) return out;
  for (const auto& s : *list)
    if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

}  // namespace

bool permits(const subject_permission& p, std::string_view subject) {
  if (!p.allow.empty() && !any_matches(p.allow, subject)) return false;
  return !any_matches(p.deny, subject);
}

expected<subject_permission, std::string> publish_permission_of(std::string_view answer) {
  const auto body = nlohmann::json::parse(answer, nullptr, false);
  if (!body.is_object()) return std::string{"the answer is not a JSON object"};
  const auto data = body.find("data");
  if (data == body.end() || !data->is_object()) {
    const auto error = body.find("error");
    return "the server answered " + (error == body.end() ? std::string{"without data"} : error->dump());
  }
  const auto perms = data->find("permissions");
  if (perms == data->end() || !perms->is_object()) return subject_permission{};  // no permissions: everything
  const auto publish = perms->find("publish");
  if (publish == perms->end() || !publish->is_object()) return subject_permission{};
  return subject_permission{subjects_at(*publish, "allow"), subjects_at(*publish, "deny")};
}

void publish_permissions::learn(subject_permission p, clock::time_point at) {
  std::lock_guard lock{mutex_};
  known_ = std::move(p);
  asked_at_ = at;
}

void publish_permissions::not_told(std::string why, bool refused, clock::time_point at) {
  std::lock_guard lock{mutex_};
  asked_at_ = at;
  if (known_ && !refused) return;
  known_.reset();
  why_unknown_ = std::move(why);
}

publish_permissions::judgement publish_permissions::judge(std::string_view subject) const {
  std::lock_guard lock{mutex_};
  if (!known_) return {verdict::unknown, why_unknown_};
  return {permits(*known_, subject) ? verdict::allowed : verdict::denied, {}};
}

bool publish_permissions::stale(clock::time_point now) const {
  std::lock_guard lock{mutex_};
  return now - asked_at_ >= trusted_for;
}

}  // namespace amqp::bus::detail
