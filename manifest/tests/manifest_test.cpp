// Every refusal of the loader, each naming the row it is about.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>

#include "manifest/manifest.hpp"

namespace {

namespace fs = std::filesystem;
using cloud::manifest::options;
using cloud::manifest::parse;

const char* const good = R"({"apps":[
  {"name":"pubsub","eager":true,"prefixes":["/v1/pubsub"],"library":"libcloud_pubsub.so"},
  {"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":["pubsub"]}
]})";

std::string error_of(const std::string& text, const options& opts = {}) {
  const auto result = parse(text, opts);
  REQUIRE_FALSE(result);
  return result.error;
}

// A pubsub row followed by the given second row.
std::string with_second(const std::string& row) {
  return R"({"apps":[{"name":"pubsub","eager":true,"prefixes":["/v1/pubsub"],"library":"libcloud_pubsub.so"},)" +
         row + "]}";
}

// A temporary plugin directory holding the named files, removed at scope exit.
struct plugin_dir {
  fs::path path;
  explicit plugin_dir(std::initializer_list<const char*> files) {
    path = fs::temp_directory_path() / ("manifest_test_" + std::to_string(::getpid()));
    fs::create_directories(path);
    for (const char* f : files) std::ofstream{path / f} << "x";
  }
  ~plugin_dir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("a good manifest parses into rows in order") {
  const auto result = parse(good, {});
  REQUIRE(result);
  const auto& rows = result.value->rows;
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].index == 0);
  CHECK(rows[0].name == "pubsub");
  CHECK(rows[0].eager);
  CHECK(rows[0].prefixes == std::vector<std::string>{"/v1/pubsub"});
  CHECK(rows[0].library == "libcloud_pubsub.so");
  CHECK(rows[0].requires_.empty());
  CHECK(rows[1].name == "amqp");
  CHECK(rows[1].requires_ == std::vector<std::string>{"pubsub"});
}

TEST_CASE("not JSON is refused with the parser's position") {
  const auto e = error_of("{\"apps\": [");
  CHECK(e.find("manifest: not JSON") == 0);
  CHECK(e.find("fix the syntax") != std::string::npos);
}

TEST_CASE("the top level must be an object holding only apps") {
  CHECK(error_of("[]").find("top level must be an object") != std::string::npos);
  CHECK(error_of(R"({"apps":[],"extra":1})").find("unknown key \"extra\"") != std::string::npos);
  CHECK(error_of("{}").find("missing key \"apps\"") != std::string::npos);
  CHECK(error_of(R"({"apps":{}})").find("\"apps\" must be an array") != std::string::npos);
  CHECK(error_of(R"({"apps":[]})").find("\"apps\" is empty") != std::string::npos);
}

TEST_CASE("a row that is not an object is refused naming its index") {
  CHECK(error_of(with_second("42")) == "row 1: a row must be an object, not number");
}

TEST_CASE("unknown keys in a row are refused") {
  const auto e = error_of(with_second(
      R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","lazy":false})"));
  CHECK(e.find("row 1 (amqp): unknown key \"lazy\"") == 0);
}

TEST_CASE("a missing name is refused naming the row index") {
  const auto e = error_of(with_second(R"({"eager":true,"prefixes":["/v1/x"],"library":"libx.so"})"));
  CHECK(e.find("row 1: missing key \"name\"") == 0);
}

TEST_CASE("missing required keys are refused") {
  CHECK(error_of(with_second(R"({"name":"amqp","prefixes":["/v1/amqp"],"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): missing key \"eager\"") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): missing key \"prefixes\"") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"]})"))
            .find("row 1 (amqp): missing key \"library\"") == 0);
}

TEST_CASE("duplicate names are refused naming both rows") {
  const auto e = error_of(with_second(
      R"({"name":"pubsub","eager":true,"prefixes":["/v1/other"],"library":"libcloud_pubsub.so"})"));
  CHECK(e == "row 1 (pubsub): duplicate name; row 0 is already named pubsub");
}

TEST_CASE("invalid names are refused") {
  for (const char* name : {"\"AMQP\"", "\"two words\"", "\"a.b\"", "\"\"", "\"1st\""}) {
    CAPTURE(name);
    const auto e = error_of(with_second(std::string{R"({"name":)"} + name +
                                        R"(,"eager":true,"prefixes":["/v1/x"],"library":"libx.so"})"));
    CHECK(e.find("row 1: invalid name") == 0);
    CHECK(e.find("one lowercase word") != std::string::npos);
  }
  CHECK(error_of(with_second(R"({"name":7,"eager":true,"prefixes":["/v1/x"],"library":"libx.so"})"))
            .find("row 1: \"name\" must be a string, not number") == 0);
}

TEST_CASE("bad types are refused naming the key") {
  CHECK(error_of(with_second(
                     R"({"name":"amqp","eager":"yes","prefixes":["/v1/amqp"],"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): \"eager\" must be true or false, not string") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":"/v1/amqp","library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): \"prefixes\" must be an array of strings, not string") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":[1],"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): \"prefixes\" must hold only strings") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":5})"))
            .find("row 1 (amqp): \"library\" must be a string, not number") == 0);
  CHECK(error_of(with_second(
                     R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":"pubsub"})"))
            .find("row 1 (amqp): \"requires\" must be an array of strings") == 0);
}

TEST_CASE("invalid prefixes and library names are refused") {
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":["v1/amqp"],"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): invalid prefix \"v1/amqp\"") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":[],"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): \"prefixes\" is empty") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":["/v1/pubsub"],"library":"libcloud_amqp.so"})"))
            .find("row 1 (amqp): prefix /v1/pubsub is already owned by row 0 (pubsub)") == 0);
  CHECK(error_of(with_second(R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"../libevil.so"})"))
            .find("row 1 (amqp): invalid library \"../libevil.so\"") == 0);
}

TEST_CASE("a library missing from the plugin directory is refused naming the directory") {
  const plugin_dir dir{"libcloud_pubsub.so"};
  const auto e = error_of(good, options{dir.path});
  CHECK(e == "row 1 (amqp): library libcloud_amqp.so does not exist in " + dir.path.string() +
                 "; build it or pass --plugin-dir");
}

TEST_CASE("libraries present in the plugin directory are accepted") {
  const plugin_dir dir{"libcloud_pubsub.so", "libcloud_amqp.so"};
  CHECK(parse(good, options{dir.path}));
}

TEST_CASE("a row requiring a capability not mounted earlier is refused") {
  const auto later = R"({"apps":[
    {"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":["pubsub"]},
    {"name":"pubsub","eager":true,"prefixes":["/v1/pubsub"],"library":"libcloud_pubsub.so"}]})";
  CHECK(error_of(later) ==
        "row 0 (amqp): requires pubsub, which no earlier row mounts; put the pubsub row before this one");
  CHECK(error_of(with_second(
                     R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":["kv"]})"))
            .find("row 1 (amqp): requires kv, which no earlier row mounts") == 0);
}

TEST_CASE("a capability required twice is refused") {
  CHECK(error_of(with_second(
            R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":["pubsub","pubsub"]})")) ==
        "row 1 (amqp): requires pubsub twice; list each capability once");
}

TEST_CASE("a row cannot require itself") {
  CHECK(error_of(with_second(
                     R"({"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":["amqp"]})"))
            .find("row 1 (amqp): requires amqp, which no earlier row mounts") == 0);
}

TEST_CASE("an eager row may not require a lazy one") {
  const auto text = R"({"apps":[
    {"name":"pubsub","eager":false,"prefixes":["/v1/pubsub"],"library":"libcloud_pubsub.so"},
    {"name":"amqp","eager":true,"prefixes":["/v1/amqp"],"library":"libcloud_amqp.so","requires":["pubsub"]}]})";
  CHECK(error_of(text) ==
        "row 1 (amqp): is eager but requires pubsub, which is lazy and is not mounted at boot; make pubsub eager");
}

TEST_CASE("load names the file and an unreadable file") {
  const auto missing = cloud::manifest::load("/nonexistent/apps.json", {});
  REQUIRE_FALSE(missing);
  CHECK(missing.error == "manifest /nonexistent/apps.json: cannot be read; pass --manifest");
}
