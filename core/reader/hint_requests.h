// How a range hint's blocks are cut into requests (BlockReader::prefetch).
#pragma once

namespace hubfs {

enum class HintRequests {
  // Spread over the request slots not yet busy with hinted or read-ahead blocks: a hint smaller
  // than the connections goes out as several small requests that arrive in one round trip (a
  // reader that needs these bytes now, and sends nothing else meanwhile).
  kSpread,
  // Each run of neighbouring blocks whole, in one request (up to max_blocks_per_hinted_request
  // blocks): for a caller that sends many hints back to back, whose first ones, spread over the
  // connections still idle, went out as 1-block requests and took a round trip each (a training
  // loop's plan: its first 16 requests carried 3 frames instead of 16; docs/benchmarks.md,
  // session 37).
  kWholeRuns,
};

}  // namespace hubfs
