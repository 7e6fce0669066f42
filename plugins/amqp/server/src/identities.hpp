#pragma once
// The bus clients of signed-in users (CLOUD_AMQP_AUTH=bus). The bus itself checks a user's
// credentials, by letting the client connect or not; every connection that signed in with the
// same user and secret shares that user's client, which closes once the last of them is gone.
#include <chrono>
#include <memory>

#include "amqp/bus/client.hpp"

namespace amqp::server {

class identities {
 public:
  // `service`: the adaptor's own client, whose bus the users sign in to.
  explicit identities(std::shared_ptr<bus::client> service);
  // Closes the clients still open (connections hold none by then), then waits for the closings.
  ~identities();
  identities(const identities&) = delete;
  identities& operator=(const identities&) = delete;

  // Blocking (a round trip to the bus when nobody holds a client of `who`). The client stays
  // open while the returned pointer, or a copy of it, lives. Kind denied: the bus refused.
  bus::bus_result<std::shared_ptr<bus::client>> sign_in(const bus::credentials& who,
                                                        std::chrono::steady_clock::time_point deadline);

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace amqp::server
