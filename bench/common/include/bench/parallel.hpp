#pragma once
// Several clients of one measurement at once: a thread each.
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace bench {

// Runs work(i) for i in [0, n) on n threads and waits for all; the first failure is rethrown.
template <class Work>
void in_parallel(std::size_t n, Work work) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> failed(n);
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        work(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& f : failed)
    if (f) std::rethrow_exception(f);
}

}  // namespace bench
