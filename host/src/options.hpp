#pragma once
// Command line and host-level environment (README, 'Configuration'). Malformed values are refused with a
// message naming the variable or flag and the value.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cloud::host {

struct options {
  std::filesystem::path manifest;
  std::filesystem::path plugin_dir;
  bool check = false;
  bool version = false;
  bool help = false;
};

struct environment {
  std::chrono::milliseconds startup_timeout{15000};
  std::string http_host = "127.0.0.1";
  std::uint16_t http_port = 8000;
};

// Either the value or the refusal message.
template <class T>
struct parsed {
  std::optional<T> value;
  std::string error;
};

parsed<options> parse_command_line(const std::vector<std::string>& args,
                                   const std::filesystem::path& exe_dir);
parsed<environment> read_environment();

// "15s", "500ms" or "15" (seconds) → a positive duration; nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
// "0".."65535"; nullopt when malformed.
std::optional<std::uint16_t> parse_port(std::string_view text);

std::string usage();

}  // namespace cloud::host
