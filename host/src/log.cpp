#include "log.hpp"

#include <cstdio>
#include <mutex>
#include <string>

namespace cloud::host {

void log_line(std::string_view source, std::string_view message) noexcept {
  static std::mutex mutex;
  try {
    std::string line = source == "cloud" ? std::string{"cloud: "}
                                         : "cloud[" + std::string{source} + "]: ";
    line.append(message);
    line.push_back('\n');
    const std::lock_guard lock{mutex};
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  } catch (...) {
    // Logging must never take the process down; a line lost to bad_alloc is acceptable.
  }
}

}  // namespace cloud::host
