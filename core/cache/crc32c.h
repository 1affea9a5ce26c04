// CRC-32C (Castagnoli), the checksum every cached block carries. It is verified on every cache
// hit, so it must cost far less than the read itself: on x86-64 with SSE4.2 it runs on the crc32
// instruction, three streams interleaved to hide the instruction's latency; elsewhere a
// slicing-by-8 table loop computes the same value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hubfs::crc32c {

// Extends a CRC-32C over data. Start from 0; extend(extend(0, a), b) == extend(0, a + b).
uint32_t extend(uint32_t crc, const void* data, size_t n);
inline uint32_t value(std::string_view data) { return extend(0, data.data(), data.size()); }

// The portable path, always available (tests compare it with the accelerated one).
uint32_t extend_portable(uint32_t crc, const void* data, size_t n);
// True when extend() runs on the SSE4.2 crc32 instruction.
bool accelerated();

}  // namespace hubfs::crc32c
