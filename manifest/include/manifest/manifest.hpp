#pragma once
// apps.json (schema.json is the contract) parsed into plain structs. Every error names the row:
// `row 1 (amqp): <cause>; <remedy>` (rows count from 0, as mount order does).
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cloud::manifest {

struct row {
  std::size_t index = 0;  // position in "apps": the mount order
  std::string name;
  bool eager = true;
  std::vector<std::string> prefixes;
  std::string library;  // a file name inside the plugin directory
  std::vector<std::string> requires_;
};

struct apps {
  std::vector<row> rows;
};

struct load_result {
  std::optional<apps> value;
  std::string error;  // set when value is empty
  explicit operator bool() const noexcept { return value.has_value(); }
};

struct options {
  // When set, each row's library must exist there; unset skips that check (order tests).
  std::optional<std::filesystem::path> plugin_dir;
};

load_result parse(std::string_view json_text, const options& opts);
load_result load(const std::filesystem::path& file, const options& opts);

// "row 1 (amqp)" — the prefix of every message about a row.
std::string row_label(std::size_t index, std::string_view name);

}  // namespace cloud::manifest
