#pragma once
// `--name value` flags for the throughput clients, and the single result line bench/run reads.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

class options {
 public:
  // Every flag takes a value; `defaults` lists the flags accepted and their default values.
  options(int argc, char** argv, std::map<std::string, std::string> defaults) : values_(std::move(defaults)) {
    for (int i = 1; i < argc; ++i) {
      std::string_view flag = argv[i];
      if (!flag.starts_with("--") || !values_.contains(std::string(flag.substr(2)))) {
        throw std::invalid_argument("unknown flag '" + std::string(flag) + "'; flags are" + listing());
      }
      if (i + 1 == argc) throw std::invalid_argument("flag '" + std::string(flag) + "' needs a value");
      values_[std::string(flag.substr(2))] = argv[++i];
    }
  }
  const std::string& text(const std::string& name) const { return values_.at(name); }
  std::uint64_t number(const std::string& name) const {
    const std::string& v = text(name);
    std::size_t used = 0;
    unsigned long long n = 0;
    try {
      n = std::stoull(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || v.empty() || n == 0) {
      throw std::invalid_argument("--" + name + " '" + v + "' is not a positive whole number");
    }
    return n;
  }

 private:
  std::string listing() const {
    std::string all;
    for (const auto& [name, value] : values_) all += " --" + name + " (" + value + ")";
    return all;
  }
  std::map<std::string, std::string> values_;
};

using clock = std::chrono::steady_clock;

inline double micros(clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The q-quantile (0..1) of `values`, which it sorts: nearest rank.
inline double quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// One line, parsed by bench/run: "messages=<n> deliver_p50=<µs> … confirm_p999=<µs>", and with
// the run's start and end, " rate=<msg/s> seconds=<s>": the messages over the whole run.
inline void report_latency(std::uint64_t messages, std::vector<double> delivered, std::vector<double> confirmed,
                           std::optional<std::pair<clock::time_point, clock::time_point>> run = std::nullopt) {
  std::printf("messages=%llu", static_cast<unsigned long long>(messages));
  for (auto [name, values] : {std::pair{"deliver", &delivered}, std::pair{"confirm", &confirmed}}) {
    for (auto [label, q] : {std::pair{"p50", 0.5}, std::pair{"p90", 0.9}, std::pair{"p99", 0.99},
                            std::pair{"p999", 0.999}}) {
      std::printf(" %s_%s=%.0f", name, label, quantile(*values, q));
    }
  }
  if (run) {
    const double seconds = std::chrono::duration<double>(run->second - run->first).count();
    std::printf(" rate=%.0f seconds=%.3f", static_cast<double>(messages) / seconds, seconds);
  }
  std::printf("\n");
}

// One line, parsed by bench/run: "rate=<msg/s> messages=<n> seconds=<s>".
inline void report(std::uint64_t messages, clock::time_point start, clock::time_point end) {
  double seconds = std::chrono::duration<double>(end - start).count();
  std::printf("rate=%.0f messages=%llu seconds=%.3f\n", static_cast<double>(messages) / seconds,
              static_cast<unsigned long long>(messages), seconds);
}

}  // namespace bench
