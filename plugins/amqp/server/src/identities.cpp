#include "identities.hpp"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <map>
#include <mutex>
#include <string>

namespace amqp::server {
namespace {

// Closing a client flushes and waits for its threads: never on an io thread.
constexpr auto close_within = std::chrono::seconds(5);

std::string key_of(const bus::credentials& who) { return who.user + '\0' + who.password; }

}  // namespace

struct identities::state {
  // What the connections of one identity share: the client closes with the last of them.
  struct lease {
    std::shared_ptr<bus::client> client;
    std::weak_ptr<state> owner;
    ~lease() {
      if (auto s = owner.lock()) {
        s->close_later(std::move(client));
      } else {
        bus::client::close_and_release(client, std::chrono::steady_clock::now() + close_within);
      }
    }
  };

  void close_later(std::shared_ptr<bus::client> client) {
    boost::asio::post(closer, [client = std::move(client)]() mutable {
      bus::client::close_and_release(client, std::chrono::steady_clock::now() + close_within);
    });
  }

  std::shared_ptr<bus::client> service;
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<lease>> signed_in;
  boost::asio::thread_pool closer{1};
};

identities::identities(std::shared_ptr<bus::client> service) : state_(std::make_shared<state>()) {
  state_->service = std::move(service);
}

identities::~identities() {
  state_->closer.join();  // posted closings end; later leases close where they go
  state_.reset();
}

bus::bus_result<std::shared_ptr<bus::client>> identities::sign_in(const bus::credentials& who,
                                                                  std::chrono::steady_clock::time_point deadline) {
  const auto key = key_of(who);
  {
    // Looked up without inserting: refused credentials must leave nothing behind.
    std::lock_guard lock{state_->mutex};
    auto it = state_->signed_in.find(key);
    if (auto held = it == state_->signed_in.end() ? nullptr : it->second.lock())
      return std::shared_ptr<bus::client>(held, held->client.get());
  }
  auto opened = state_->service->sign_in(who, deadline);
  if (!opened) return opened.error();
  auto held = std::make_shared<state::lease>();
  held->client = std::move(*opened);
  held->owner = state_;
  std::lock_guard lock{state_->mutex};
  auto& slot = state_->signed_in[key];
  // Another connection of the same identity may have signed in meanwhile: keep the first.
  if (auto first = slot.lock()) return std::shared_ptr<bus::client>(first, first->client.get());
  slot = held;
  std::erase_if(state_->signed_in, [](const auto& entry) { return entry.second.expired(); });
  return std::shared_ptr<bus::client>(held, held->client.get());
}

}  // namespace amqp::server
