// An ABI header edit without a version bump fails here: the headers' FNV-1a hash must equal
// the value recorded next to abi_version in abi.hpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plugin_api/abi.hpp"

namespace {

namespace fs = std::filesystem;

std::uint64_t fnv1a(std::uint64_t hash, const std::string& bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string read_file(const fs::path& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The line recording the hash cannot be part of what it hashes.
std::string without_hash_line(const std::string& text) {
  std::istringstream in{text};
  std::string line;
  std::string kept;
  while (std::getline(in, line)) {
    if (line.find("abi_headers_hash =") == std::string::npos) kept += line + '\n';
  }
  return kept;
}

// File names take part so that renaming or adding a header also counts as an edit.
std::uint64_t headers_hash(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator{dir}) {
    if (entry.path().extension() == ".hpp") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& file : files) {
    hash = fnv1a(hash, file.filename().string());
    hash = fnv1a(hash, without_hash_line(read_file(file)));
  }
  return hash;
}

}  // namespace

TEST_CASE("plugin_api headers match the hash recorded with abi_version") {
  const fs::path dir{CLOUD_PLUGIN_API_INCLUDE_DIR};
  REQUIRE(fs::is_directory(dir));
  const auto actual = headers_hash(dir);
  std::ostringstream hex;
  hex << "0x" << std::hex << actual << "ULL";
  INFO("plugin_api headers changed: bump abi_version in abi.hpp and record abi_headers_hash = ",
       hex.str());
  CHECK(actual == cloud::plugin_api::abi_headers_hash);
}

TEST_CASE("the build tag names the compiler and the Boost version") {
  const std::string tag{cloud::plugin_api::build_tag};
  CHECK(tag.find("boost-" BOOST_LIB_VERSION) != std::string::npos);
  CHECK((tag.rfind("gcc-", 0) == 0 || tag.rfind("clang-", 0) == 0));
}
