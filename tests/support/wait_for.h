// Waiting, without sleeping, for another thread of the test's process to bring a state about.
#pragma once

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace hubfs::testing {

// Yields until done() is true. Bounded so a state that never comes fails the test instead of
// hanging the suite; the bound is far beyond any machine's slowness (not a timing assertion).
template <typename Pred>
void wait_for_state(Pred done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "the awaited state never came";
      return;
    }
    std::this_thread::yield();
  }
}

}  // namespace hubfs::testing
