// RangeFetcherOptions naming an Env (the fetcher has no default Env): the manual one a test
// moves, or the real one where a test runs real threads and sockets.
#pragma once

#include "common/env.h"
#include "net/range_fetcher.h"

namespace hubfs::testing {

inline RangeFetcherOptions fetcher_on(Env& env) {
  RangeFetcherOptions o;
  o.env = &env;
  return o;
}

}  // namespace hubfs::testing
