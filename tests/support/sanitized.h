// Whether this test program runs under a sanitizer (ASan+UBSan or TSan).
//
// Tests that move many bytes or loop over many random cases scale down under one: the sanitizers
// check memory and thread safety, which a few dozen cases exercise as well as hundreds, while
// every byte copied costs them several times its plain CPU (TSan checks the shadow of each
// memcpy'd range). The full count runs in the Release pass.
#pragma once

namespace hubfs::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// `full` cases in the Release pass, a quarter of them (at least one) under a sanitizer.
constexpr int sanitized_count(int full) { return kSanitized ? (full / 4 > 0 ? full / 4 : 1) : full; }

}  // namespace hubfs::testing
