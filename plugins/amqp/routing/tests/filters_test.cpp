#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <random>

#include "amqp/routing/filters.hpp"

using namespace amqp::routing;
using filters = std::vector<std::string>;

TEST_CASE("subject_matches: * is one token, > one or more and only last") {
  const std::vector<std::tuple<std::string_view, std::string_view, bool>> table{
      {"amqp.t.a", "amqp.t.a", true},     {"amqp.t.a", "amqp.t.b", false},
      {"amqp.t.*", "amqp.t.a", true},     {"amqp.t.*", "amqp.t", false},
      {"amqp.t.*", "amqp.t.a.b", false},  {"amqp.t.>", "amqp.t.a", true},
      {"amqp.t.>", "amqp.t.a.b", true},   {"amqp.t.>", "amqp.t", false},
      {"amqp.*.a", "amqp.x.a", true},     {"amqp.*.a", "amqp.x.b", false},
      {">", "a", true},                   {">", "a.b", true},
      {"*", "a", true},                   {"*", "a.b", false},
      {"amqp.t", "amqp.t.a", false},      {"amqp.t.a.>", "amqp.t.ab", false},
      {"amqp.>.a", "amqp.x.a", false},  // `>` not last is no filter at all
  };
  for (const auto& [filter, subject, expected] : table) {
    CAPTURE(filter);
    CAPTURE(subject);
    CHECK(subject_matches(filter, subject) == expected);
  }
}

TEST_CASE("filter_covers: subsumption") {
  const std::vector<std::tuple<std::string_view, std::string_view, bool>> table{
      {"amqp.f.>", "amqp.f.x", true},       {"amqp.f.>", "amqp.f.*.>", true},
      {"amqp.f.>", "amqp.f.>", true},       {"amqp.t.a.*", "amqp.t.a.b", true},
      {"amqp.t.>", "amqp.t", false},        {"amqp.t.*", "amqp.t.>", false},
      {"amqp.t.a", "amqp.t.*", false},      {"amqp.t.*", "amqp.t.*", true},
      {"amqp.*.>", "amqp.t.a", true},       {"amqp.t.a.b", "amqp.t.a", false},
      {"amqp.t.a", "amqp.t.a.b", false},    {"amqp.>", "amqp.t", true},
  };
  for (const auto& [general, specific, expected] : table) {
    CAPTURE(general);
    CAPTURE(specific);
    CHECK(filter_covers(general, specific) == expected);
  }
}

TEST_CASE("normalize_filters drops covered filters, dedupes and sorts") {
  CHECK(normalize_filters({"amqp.f.x", "amqp.f.>", "amqp.f", "amqp.f.>"}) ==
        filters{"amqp.f", "amqp.f.>"});
  CHECK(normalize_filters({"amqp.t.a.b", "amqp.t.a.*", "amqp._.q"}) ==
        filters{"amqp._.q", "amqp.t.a.*"});
  CHECK(normalize_filters({"amqp.t", "amqp.t.>"}) == filters{"amqp.t", "amqp.t.>"});
  CHECK(normalize_filters({}).empty());
}

namespace {

// Random filters and subjects over a tiny alphabet, so that they collide often.
struct generator {
  std::mt19937 rng{20261129};
  std::string token(bool wildcards, bool last) {
    int pick = std::uniform_int_distribution<int>(0, wildcards ? 4 : 2)(rng);
    if (pick == 3) return "*";
    if (pick == 4) return last ? ">" : "*";
    return std::string(1, static_cast<char>('a' + pick));
  }
  std::string subject(bool wildcards) {
    int n = std::uniform_int_distribution<int>(1, 4)(rng);
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? "." : "") + token(wildcards, i + 1 == n);
    return s;
  }
  filters some_filters() {
    filters f(std::uniform_int_distribution<std::size_t>(1, 4)(rng));
    for (auto& x : f) x = subject(true);
    return f;
  }
};

std::vector<std::string> all_subjects() {  // every literal subject of 1..5 tokens over a..c, x
  std::vector<std::string> out{""};
  std::vector<std::string> result;
  for (int len = 1; len <= 5; ++len) {
    std::vector<std::string> next;
    for (const auto& prefix : out) {
      for (std::string t : {"a", "b", "c", "x"}) next.push_back(prefix.empty() ? t : prefix + "." + t);
    }
    result.insert(result.end(), next.begin(), next.end());
    out = std::move(next);
  }
  return result;
}

bool any_matches(const filters& fs, const std::string& subject) {
  for (const auto& f : fs) {
    if (subject_matches(f, subject)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("property: normalize keeps the matched set") {
  generator gen;
  const auto subjects = all_subjects();
  for (int round = 0; round < 200; ++round) {
    auto input = gen.some_filters();
    auto normal = normalize_filters(input);
    CAPTURE(input);
    for (std::size_t i = 0; i < normal.size(); ++i) {
      for (std::size_t j = 0; j < normal.size(); ++j) {
        if (i != j) CHECK_FALSE(filter_covers(normal[i], normal[j]));
      }
    }
    std::string lost;  // the first subject the property fails on, if any
    for (const auto& s : subjects) {
      if (lost.empty() && any_matches(normal, s) != any_matches(input, s)) lost = s;
    }
    CHECK(lost == "");
  }
}

TEST_CASE("property: filter_covers agrees with matching over every subject") {
  generator gen;
  const auto subjects = all_subjects();
  for (int round = 0; round < 300; ++round) {
    auto general = gen.subject(true);
    auto specific = gen.subject(true);
    bool by_subjects = true;
    for (const auto& s : subjects) {
      if (subject_matches(specific, s) && !subject_matches(general, s)) by_subjects = false;
    }
    CAPTURE(general);
    CAPTURE(specific);
    // The subjects hold a token ('x') and a length (5) no generated filter names, so a finite
    // check is exact: `*` and `>` in `specific` always reach a subject `general` must match.
    CHECK(filter_covers(general, specific) == by_subjects);
  }
}
