#include "manifest/manifest.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

namespace cloud::manifest {
namespace {

using json = nlohmann::json;

const std::set<std::string> row_keys{"name", "eager", "prefixes", "library", "requires"};

// A failed check: the message, already naming the row.
struct refusal {
  std::string message;
};

std::string type_name(const json& j) { return j.type_name(); }

bool is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  if (name.front() < 'a' || name.front() > 'z') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

bool is_valid_prefix(std::string_view prefix) {
  if (prefix.size() < 2 || prefix.front() != '/' || prefix.back() == '/') return false;
  if (prefix.find("//") != std::string_view::npos) return false;
  return std::all_of(prefix.begin(), prefix.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '/' || c == '.' || c == '_' || c == '~' || c == '-';
  });
}

bool is_valid_library(std::string_view file) {
  return file.size() > 6 && file.rfind("lib", 0) == 0 && file.substr(file.size() - 3) == ".so" &&
         file.find('/') == std::string_view::npos;
}

std::vector<std::string> string_array(const json& j, const std::string& label, const char* key) {
  if (!j.is_array()) {
    throw refusal{label + ": \"" + key + "\" must be an array of strings, not " + type_name(j)};
  }
  std::vector<std::string> out;
  for (const auto& item : j) {
    if (!item.is_string()) {
      throw refusal{label + ": \"" + key + "\" must hold only strings, found " + type_name(item)};
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string row_name(const json& j, std::size_t index) {
  const std::string label = "row " + std::to_string(index);
  if (!j.contains("name")) throw refusal{label + ": missing key \"name\"; give the row a name"};
  const auto& name = j.at("name");
  if (!name.is_string()) {
    throw refusal{label + ": \"name\" must be a string, not " + type_name(name)};
  }
  const auto text = name.get<std::string>();
  if (!is_valid_name(text)) {
    throw refusal{label + ": invalid name \"" + text +
                  "\"; a name is one lowercase word ([a-z][a-z0-9]*, at most 32 characters)"};
  }
  return text;
}

void check_keys(const json& j, const std::string& label) {
  for (const auto& [key, value] : j.items()) {
    if (!row_keys.count(key)) {
      throw refusal{label + ": unknown key \"" + key +
                    "\"; allowed keys are name, eager, prefixes, library, requires"};
    }
  }
  for (const char* key : {"eager", "prefixes", "library"}) {
    if (!j.contains(key)) throw refusal{label + ": missing key \"" + key + "\""};
  }
}

std::vector<std::string> row_prefixes(const json& j, const std::string& label) {
  auto prefixes = string_array(j.at("prefixes"), label, "prefixes");
  if (prefixes.empty()) throw refusal{label + ": \"prefixes\" is empty; list at least one path"};
  for (const auto& p : prefixes) {
    if (!is_valid_prefix(p)) {
      throw refusal{label + ": invalid prefix \"" + p +
                    "\"; a prefix is an absolute path such as /v1/name, without a trailing /"};
    }
  }
  return prefixes;
}

std::string row_library(const json& j, const std::string& label, const options& opts) {
  const auto& lib = j.at("library");
  if (!lib.is_string()) {
    throw refusal{label + ": \"library\" must be a string, not " + type_name(lib)};
  }
  auto file = lib.get<std::string>();
  if (!is_valid_library(file)) {
    throw refusal{label + ": invalid library \"" + file +
                  "\"; give a file name such as libcloud_<name>.so, without a directory"};
  }
  if (opts.plugin_dir) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*opts.plugin_dir / file, ec)) {
      throw refusal{label + ": library " + file + " does not exist in " +
                    opts.plugin_dir->string() + "; build it or pass --plugin-dir"};
    }
  }
  return file;
}

row parse_row(const json& j, std::size_t index, const options& opts) {
  if (!j.is_object()) {
    throw refusal{"row " + std::to_string(index) + ": a row must be an object, not " + type_name(j)};
  }
  row r;
  r.index = index;
  r.name = row_name(j, index);
  const auto label = row_label(index, r.name);
  check_keys(j, label);
  if (!j.at("eager").is_boolean()) {
    throw refusal{label + ": \"eager\" must be true or false, not " + type_name(j.at("eager"))};
  }
  r.eager = j.at("eager").get<bool>();
  r.prefixes = row_prefixes(j, label);
  r.library = row_library(j, label, opts);
  if (j.contains("requires")) r.requires_ = string_array(j.at("requires"), label, "requires");
  return r;
}

// Rules that relate rows to each other: unique names and prefixes, requirements mounted first.
void check_across(const std::vector<row>& rows) {
  std::map<std::string, const row*> by_name;
  std::map<std::string, const row*> by_prefix;
  for (const auto& r : rows) {
    const auto label = row_label(r.index, r.name);
    if (auto it = by_name.find(r.name); it != by_name.end()) {
      throw refusal{label + ": duplicate name; row " + std::to_string(it->second->index) +
                    " is already named " + r.name};
    }
    for (const auto& p : r.prefixes) {
      if (auto it = by_prefix.find(p); it != by_prefix.end()) {
        throw refusal{label + ": prefix " + p + " is already owned by " +
                      row_label(it->second->index, it->second->name)};
      }
      by_prefix.emplace(p, &r);
    }
    for (std::size_t k = 0; k < r.requires_.size(); ++k) {
      const auto& need = r.requires_[k];
      if (std::find(r.requires_.begin(), r.requires_.begin() + static_cast<std::ptrdiff_t>(k), need) !=
          r.requires_.begin() + static_cast<std::ptrdiff_t>(k)) {
        throw refusal{label + ": requires " + need + " twice; list each capability once"};
      }
      auto it = by_name.find(need);
      if (it == by_name.end()) {
        throw refusal{label + ": requires " + need +
                      ", which no earlier row mounts; put the " + need + " row before this one"};
      }
      if (r.eager && !it->second->eager) {
        throw refusal{label + ": is eager but requires " + need +
                      ", which is lazy and is not mounted at boot; make " + need + " eager"};
      }
    }
    by_name.emplace(r.name, &r);
  }
}

apps parse_document(const json& doc, const options& opts) {
  if (!doc.is_object()) throw refusal{"manifest: the top level must be an object with \"apps\""};
  for (const auto& [key, value] : doc.items()) {
    if (key != "apps") throw refusal{"manifest: unknown key \"" + key + "\"; only \"apps\" is allowed"};
  }
  if (!doc.contains("apps")) throw refusal{"manifest: missing key \"apps\""};
  const auto& rows = doc.at("apps");
  if (!rows.is_array()) throw refusal{"manifest: \"apps\" must be an array, not " + type_name(rows)};
  if (rows.empty()) throw refusal{"manifest: \"apps\" is empty; list at least one row"};
  apps out;
  for (std::size_t i = 0; i < rows.size(); ++i) out.rows.push_back(parse_row(rows[i], i, opts));
  check_across(out.rows);
  return out;
}

}  // namespace

std::string row_label(std::size_t index, std::string_view name) {
  return "row " + std::to_string(index) + " (" + std::string{name} + ")";
}

load_result parse(std::string_view json_text, const options& opts) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    return {std::nullopt, std::string{"manifest: not JSON ("} + e.what() + "); fix the syntax"};
  }
  try {
    return {parse_document(doc, opts), {}};
  } catch (const refusal& r) {
    return {std::nullopt, r.message};
  }
}

load_result load(const std::filesystem::path& file, const options& opts) {
  std::ifstream in{file, std::ios::binary};
  if (!in) return {std::nullopt, "manifest " + file.string() + ": cannot be read; pass --manifest"};
  std::ostringstream text;
  text << in.rdbuf();
  auto result = parse(text.str(), opts);
  if (!result) result.error = file.string() + ": " + result.error;
  return result;
}

}  // namespace cloud::manifest
