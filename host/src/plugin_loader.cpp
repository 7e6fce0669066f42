#include "plugin_loader.hpp"

#include <boost/dll/import.hpp>
#include <cstdint>
#include <cstring>

#include "plugin_api/abi.hpp"

namespace cloud::host {
namespace {

namespace api = cloud::plugin_api;

struct opened {
  boost::dll::shared_library library;
  std::string error;
};

// rtld_now: an unresolved symbol is reported here, naming the file, not at first call.
opened open_checked(const manifest::row& row, const std::filesystem::path& plugin_dir) {
  const auto label = manifest::row_label(row.index, row.name);
  const auto path = plugin_dir / row.library;
  opened out;
  try {
    out.library.load(boost::dll::fs::path{path.string()},
                     boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    out.error = label + ": cannot load " + path.string() + ": " + e.what();
    return out;
  }
  if (!out.library.has(api::abi_version_symbol) || !out.library.has(api::build_tag_symbol)) {
    out.error = label + ": " + path.string() +
                " is not a cloud plugin (no cloud_plugin_abi_version/cloud_plugin_build_tag); "
                "build it with CLOUD_PLUGIN()";
    return out;
  }
  const auto version = out.library.get<std::uint32_t()>(api::abi_version_symbol)();
  if (version != api::abi_version) {
    out.error = label + ": " + path.string() + " has plugin ABI version " + std::to_string(version) +
                " but this host speaks " + std::to_string(api::abi_version) +
                "; rebuild the plugin against this host's plugin_api";
    return out;
  }
  const char* tag = out.library.get<const char*()>(api::build_tag_symbol)();
  if (tag == nullptr || std::strcmp(tag, api::build_tag) != 0) {
    out.error = label + ": " + path.string() + " was built as \"" + (tag ? tag : "") +
                "\" but this host is \"" + api::build_tag +
                "\"; build host and plugins with the same compiler, Boost and sanitizer settings";
    return out;
  }
  if (!out.library.has(api::factory_symbol)) {
    out.error = label + ": " + path.string() + " exports no " + api::factory_symbol +
                "; build it with CLOUD_PLUGIN()";
  }
  return out;
}

}  // namespace

std::string check_library(const manifest::row& row, const std::filesystem::path& plugin_dir) {
  return open_checked(row, plugin_dir).error;
}

load_outcome load_plugin(const manifest::row& row, const std::filesystem::path& plugin_dir) {
  auto opened = open_checked(row, plugin_dir);
  if (!opened.error.empty()) return {nullptr, opened.error};
  const auto label = manifest::row_label(row.index, row.name);
  auto& factory = opened.library.get_alias<api::plugin_factory>(api::factory_symbol);
  auto object = factory();
  if (!object) return {nullptr, label + ": the plugin's factory failed to create it"};
  if (object->name() != row.name) {
    return {nullptr, label + ": " + row.library + " is the plugin \"" + std::string{object->name()} +
                         "\", not \"" + row.name + "\"; fix the row's name or library"};
  }
  return {std::make_unique<plugin_handle>(std::move(opened.library), std::move(object)), {}};
}

}  // namespace cloud::host
