#pragma once
// NATS subject-filter algebra: matching, subsumption and the narrowest single cover.
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
// a multi-filter consumer's filter_subjects (it refuses overlapping filters).
std::vector<std::string> normalize_filters(std::vector<std::string> filters);

// The narrowest single filter matching every subject any of `filters` matches (for
// nats-server 2.9, which has no multi-filter consumers; DESIGN.md §5). Token-wise: if all
// have the same length and none ends in `>`, each position is the common literal or `*`;
// otherwise, with m = the fewest tokens any input can match, positions 0..m-2 are joined
// that way and position m-1 becomes `>`. {amqp.t.a.>, amqp.t.a} → amqp.t.>;
// {amqp._.q, amqp.x.k} → amqp.*.*; {amqp.f.>, amqp.f, amqp._.q} → amqp.>.
// An empty input gives "" (no filter: a queue always has its default binding).
std::string covering_filter(const std::vector<std::string>& filters);

}  // namespace amqp::routing
