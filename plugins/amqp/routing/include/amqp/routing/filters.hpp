#pragma once
// NATS subject-filter algebra: matching and subsumption.
// Tokens are dot-separated; `*` matches exactly one token, `>` one or more and only last.
#include <string>
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
// a multi-filter consumer's filter_subjects (it refuses a filter another contains).
std::vector<std::string> normalize_filters(std::vector<std::string> filters);

}  // namespace amqp::routing
