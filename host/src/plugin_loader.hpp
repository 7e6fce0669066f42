#pragma once
// Opens a plugin library, checks the ABI handshake before touching the factory, and creates
// the plugin. The handle owns the library, so no plugin object outlives its code.
#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "manifest/manifest.hpp"
#include "plugin_api/plugin.hpp"

namespace cloud::host {

class plugin_handle {
 public:
  plugin_handle(boost::dll::shared_library library, std::unique_ptr<plugin_api::plugin> object)
      : library_{std::move(library)}, object_{std::move(object)} {}
  plugin_handle(const plugin_handle&) = delete;
  plugin_handle& operator=(const plugin_handle&) = delete;
  // The object is destroyed before the library unloads (members die in reverse order).
  ~plugin_handle() { object_.reset(); }

  plugin_api::plugin& get() noexcept { return *object_; }

 private:
  boost::dll::shared_library library_;
  std::unique_ptr<plugin_api::plugin> object_;
};

struct load_outcome {
  std::unique_ptr<plugin_handle> handle;  // null on failure
  std::string error;                      // "row N (name): ..." on failure
};

// Opens and checks only (for --check); the library is closed again.
std::string check_library(const manifest::row& row, const std::filesystem::path& plugin_dir);
// Opens, checks and creates the plugin; its name() must equal the row's.
load_outcome load_plugin(const manifest::row& row, const std::filesystem::path& plugin_dir);

}  // namespace cloud::host
