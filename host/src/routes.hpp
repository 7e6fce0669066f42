#pragma once
// What each HTTP request is answered with. Pure: the server does the I/O and lazy mounting.
#include <optional>
#include <string>
#include <string_view>

#include "application.hpp"

namespace cloud::host {

struct http_reply {
  unsigned status = 200;
  std::string body;  // JSON
};

// The lazy row whose prefix owns `path`, if any (mounting it comes before answering).
std::optional<std::size_t> lazy_row_for(const application& app, std::string_view path);

// `target` may carry a query string; it is ignored.
http_reply answer(const application& app, std::string_view method, std::string_view target);

}  // namespace cloud::host
