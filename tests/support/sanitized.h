// Whether this test program runs under a sanitizer (ASan+UBSan or TSan).
//
// Tests that move many bytes or loop over many random cases scale down under one: the sanitizers
// check memory and thread safety, which a few dozen cases exercise as well as hundreds, while
// every byte copied costs them several times its plain CPU (TSan checks the shadow of each
// memcpy'd range). The full count runs in the Release pass.
#pragma once

// HUBFS_UNDER_ASAN and HUBFS_UNDER_TSAN: 1 in a program built with that sanitizer, for #if.
// gcc defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang (scripts/test.sh builds the
// sanitizer passes with it) defines only the first before version 18, and says both through
// __has_feature. Test with these, never with gcc's macros alone.
#if defined(__SANITIZE_ADDRESS__)
#define HUBFS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HUBFS_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define HUBFS_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HUBFS_UNDER_TSAN 1
#endif
#endif
#ifndef HUBFS_UNDER_ASAN
#define HUBFS_UNDER_ASAN 0
#endif
#ifndef HUBFS_UNDER_TSAN
#define HUBFS_UNDER_TSAN 0
#endif

namespace hubfs::testing {

#if HUBFS_UNDER_ASAN || HUBFS_UNDER_TSAN
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// `full` cases in the Release pass, a quarter of them (at least one) under a sanitizer.
constexpr int sanitized_count(int full) { return kSanitized ? (full / 4 > 0 ? full / 4 : 1) : full; }

}  // namespace hubfs::testing
