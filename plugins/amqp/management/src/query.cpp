#include "query.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>
#include <vector>

namespace amqp::management {
namespace {

using json = nlohmann::json;

constexpr std::uint64_t default_page_size = 100;
constexpr std::uint64_t largest_page_size = 500;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A path of no keys ("." or "..") names nothing: put_path would take the last of none.
const json* at_path(const json& item, const std::string& dotted) {
  const auto keys = split(dotted, '.');
  if (keys.empty()) return nullptr;
  const json* at = &item;
  for (const auto& key : keys) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return at;
}

void put_path(json& out, const std::string& dotted, const json& value) {
  json* at = &out;
  const auto keys = split(dotted, '.');
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) at = &(*at)[keys[i]];
  (*at)[keys.back()] = value;
}

std::optional<std::uint64_t> positive(const query& q, std::string_view key, std::uint64_t fallback,
                                      std::string& bad) {
  auto it = q.find(key);
  if (it == q.end()) return fallback;
  std::uint64_t n = 0;
  const auto& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n == 0) {
    bad = std::string(key) + " must be a positive integer, not '" + text + "'";
    return std::nullopt;
  }
  return n;
}

bool flag(const query& q, std::string_view key) {
  auto it = q.find(key);
  return it != q.end() && it->second == "true";
}

}  // namespace

std::string properties_key(std::string_view routing_key) {
  if (routing_key.empty()) return "~";
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : routing_key) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  return out;
}

std::string routing_key_of(std::string_view properties_key) {
  return properties_key == "~" ? std::string{} : percent_decode(properties_key, true);
}

std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else if (text[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

query parse_query(std::string_view text) {
  query q;
  for (const auto& pair : split(text, '&')) {
    const auto eq = pair.find('=');
    if (eq == std::string::npos) {
      q[percent_decode(pair, true)] = "";
    } else {
      q[percent_decode(std::string_view(pair).substr(0, eq), true)] =
          percent_decode(std::string_view(pair).substr(eq + 1), true);
    }
  }
  return q;
}

json keep_columns(const json& item, const query& q) {
  auto it = q.find("columns");
  if (it == q.end() || it->second.empty()) return item;
  json out = json::object();
  for (const auto& column : split(it->second, ','))
    if (const auto* value = at_path(item, column)) put_path(out, column, *value);
  return out;
}

shaped shape_list(json items, const query& q) {
  const std::size_t total = items.size();
  if (auto name = q.find("name"); name != q.end() && !name->second.empty()) {
    json kept = json::array();
    if (flag(q, "use_regex")) {
      std::regex pattern;
      try {
        pattern = std::regex(name->second, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        return {json(), "name is not a valid regular expression: '" + name->second + "'"};
      }
      for (auto& item : items)
        if (std::regex_search(item.value("name", std::string{}), pattern)) kept.push_back(std::move(item));
    } else {
      for (auto& item : items)
        if (item.value("name", std::string{}).find(name->second) != std::string::npos) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (auto sort = q.find("sort"); sort != q.end() && !sort->second.empty()) {
    const std::string key = sort->second;
    std::stable_sort(items.begin(), items.end(), [&](const json& a, const json& b) {
      const json* x = at_path(a, key);
      const json* y = at_path(b, key);
      if (x == nullptr || y == nullptr) return x == nullptr && y != nullptr;
      return *x < *y;
    });
    if (flag(q, "sort_reverse")) std::reverse(items.begin(), items.end());
  }
  for (auto& item : items) item = keep_columns(item, q);
  if (!q.contains("page")) return {std::move(items), std::nullopt};
  std::string bad;
  const auto page = positive(q, "page", 1, bad);
  const auto page_size = positive(q, "page_size", default_page_size, bad);
  if (!page || !page_size) return {json(), bad};
  if (*page_size > largest_page_size) {
    return {json(), "page_size must be at most " + std::to_string(largest_page_size) + ", not " +
                        std::to_string(*page_size)};
  }
  const std::size_t filtered = items.size();
  const std::size_t page_count = std::max<std::size_t>(1, (filtered + *page_size - 1) / *page_size);
  if (*page > page_count) {
    return {json(), "page " + std::to_string(*page) + " is past the last page (" + std::to_string(page_count) + ")"};
  }
  json page_items = json::array();
  for (std::size_t i = (*page - 1) * *page_size; i < filtered && i < *page * *page_size; ++i)
    page_items.push_back(std::move(items[i]));
  json out = {{"filtered_count", filtered}, {"item_count", page_items.size()}, {"items", std::move(page_items)},
              {"page", *page},           {"page_count", page_count},         {"page_size", *page_size},
              {"total_count", total}};
  return {std::move(out), std::nullopt};
}

}  // namespace amqp::management
