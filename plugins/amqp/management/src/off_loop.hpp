#pragma once
// Blocking work (bus requests, a sign-in) off the listener's loop.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <type_traits>

namespace amqp::management {

namespace net = boost::asio;

// Blocking work (bus requests) on `pool`; the coroutine resumes on its own executor with the result.
// Taken by reference and named by the caller: g++ 12 destroys a lambda made inside a co_await's
// expression twice (channel_context.hpp says more).
template <class Work>
auto off_loop(const net::any_io_executor& pool, Work&& work) {
  using work_t = std::decay_t<Work>;
  using result_t = std::invoke_result_t<work_t&>;
  return net::async_initiate<const net::use_awaitable_t<>&, void(std::optional<result_t>)>(
      [pool](auto handler, work_t w) {
        auto resume = std::make_shared<decltype(handler)>(std::move(handler));
        net::post(pool, [resume, w = std::move(w)]() mutable {
          std::optional<result_t> result{w()};
          auto ex = net::get_associated_executor(*resume);
          net::post(ex, [resume, result = std::move(result)]() mutable { (*resume)(std::move(result)); });
        });
      },
      net::use_awaitable, std::forward<Work>(work));
}

}  // namespace amqp::management
