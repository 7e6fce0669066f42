#include "options.hpp"

#include <charconv>
#include <cstdlib>

namespace cloud::host {
namespace {

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::string refuse_variable(const char* name, std::string_view value, std::string_view expected) {
  return std::string{name} + "=\"" + std::string{value} + "\" is malformed; expected " +
         std::string{expected};
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::uint64_t scale = 1000;  // a bare number is seconds
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    scale = 1;
    text.remove_suffix(2);
  } else if (text.size() > 1 && text.back() == 's') {
    text.remove_suffix(1);
  }
  const auto number = parse_unsigned(text);
  // An hour bounds the arithmetic and is far beyond any sane startup window.
  if (!number || *number == 0 || *number * scale > 3'600'000) return std::nullopt;
  return std::chrono::milliseconds{*number * scale};
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  const auto number = parse_unsigned(text);
  if (!number || *number > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(*number);
}

parsed<environment> read_environment() {
  environment env;
  if (const char* v = std::getenv("CLOUD_STARTUP_TIMEOUT")) {
    const auto d = parse_duration(v);
    if (!d) {
      return {std::nullopt, refuse_variable("CLOUD_STARTUP_TIMEOUT", v,
                                            "a positive duration such as 15s, 500ms or 15 (seconds), at most 1 hour")};
    }
    env.startup_timeout = *d;
  }
  if (const char* v = std::getenv("CLOUD_HTTP_HOST")) {
    if (*v == '\0') return {std::nullopt, refuse_variable("CLOUD_HTTP_HOST", v, "an IP address such as 127.0.0.1")};
    env.http_host = v;
  }
  if (const char* v = std::getenv("CLOUD_HTTP_PORT")) {
    const auto p = parse_port(v);
    if (!p) return {std::nullopt, refuse_variable("CLOUD_HTTP_PORT", v, "a port number 0-65535 (0 picks a free port)")};
    env.http_port = *p;
  }
  return {env, {}};
}

parsed<options> parse_command_line(const std::vector<std::string>& args,
                                   const std::filesystem::path& exe_dir) {
  options opts;
  opts.manifest = exe_dir / ".." / "share" / "cloud" / "apps.json";
  opts.plugin_dir = exe_dir / ".." / "lib" / "cloud" / "plugins";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    const bool has_value = i + 1 < args.size();
    if (arg == "--check") {
      opts.check = true;
    } else if (arg == "--version") {
      opts.version = true;
    } else if (arg == "--help" || arg == "-h") {
      opts.help = true;
    } else if ((arg == "--manifest" || arg == "--plugin-dir") && has_value) {
      (arg == "--manifest" ? opts.manifest : opts.plugin_dir) = args[++i];
    } else if (arg == "--manifest" || arg == "--plugin-dir") {
      return {std::nullopt, arg + " needs a path; see --help"};
    } else {
      return {std::nullopt, "unknown argument \"" + arg + "\"; see --help"};
    }
  }
  opts.manifest = opts.manifest.lexically_normal();
  opts.plugin_dir = opts.plugin_dir.lexically_normal();
  return {opts, {}};
}

std::string usage() {
  return "usage: cloud [--manifest FILE] [--plugin-dir DIR] [--check] [--version]\n"
         "  --manifest FILE   apps.json (default: <exe dir>/../share/cloud/apps.json)\n"
         "  --plugin-dir DIR  plugin libraries (default: <exe dir>/../lib/cloud/plugins)\n"
         "  --check           validate the manifest and each library's ABI, mount nothing\n"
         "  --version         print the version and the plugin ABI, then exit\n";
}

}  // namespace cloud::host
