#pragma once
// NATS subject-filter algebra: matching, subsumption and overlap.
// Tokens are dot-separated; `*` matches exactly one token, `>` one or more and only last.
#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

namespace amqp::routing {

// Does the (literal) subject match the filter, with NATS semantics?
bool subject_matches(std::string_view filter, std::string_view subject);

// Does `general` match every subject that `specific` matches? (`amqp.f.>` covers `amqp.f.x`
// and `amqp.f.*.>`; `amqp.t.a.*` covers `amqp.t.a.b`; `amqp.t.>` does NOT cover `amqp.t`.)
// Every filter covers itself.
bool filter_covers(std::string_view general, std::string_view specific);

// Drop every filter covered by another, deduplicate and sort: the set JetStream accepts as
// a multi-filter consumer's filter_subjects (it refuses overlapping filters).
std::vector<std::string> normalize_filters(std::vector<std::string> filters);

// Do some subjects match both filters? (`amqp.t.a.*` and `amqp.t.*.b` both match `amqp.t.a.b`.)
bool filters_collide(std::string_view a, std::string_view b);

// The first two filters of a normalized set that collide although neither covers the other
// (nats-server before 2.14 refuses such a consumer); nullopt when there are none.
std::optional<std::pair<std::string, std::string>> partial_overlap(const std::vector<std::string>& normalized);

}  // namespace amqp::routing
