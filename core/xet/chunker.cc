#include "xet/chunker.h"

#include <algorithm>

namespace hubfs::xet {

// The gear table: rust-gearhash's DEFAULT_TABLE (src/table.rs at commit adad44e7141c, the
// revision xet-core's chunking spec links), 256 random 64-bit constants. Interoperability needs
// exactly these values.
const uint64_t kGearTable[256] = {
    0xb088d3a9e840f559ull, 0x5652c7f739ed20d6ull, 0x45b28969898972abull, 0x6b0a89d5b68ec777ull,
    0x368f573e8b7a31b7ull, 0x1dc636dce936d94bull, 0x207a4c4e5554d5b6ull, 0xa474b34628239acbull,
    0x3b06a83e1ca3b912ull, 0x90e78d6c2f02baf7ull, 0xe1c92df7150d9a8aull, 0x8e95053a1086d3adull,
    0x5a2ef4f1b83a0722ull, 0xa50fac949f807faeull, 0x0e7303eb80d8d681ull, 0x99b07edc1570ad0full,
    0x689d2fb555fd3076ull, 0x00005082119ea468ull, 0xc4b08306a88fcc28ull, 0x3eb0678af6374afdull,
    0xf19f87ab86ad7436ull, 0xf2129fbfbe6bc736ull, 0x481149575c98a4edull, 0x0000010695477bc5ull,
    0x1fba37801a9ceaccull, 0x3bf06fd663a49b6dull, 0x99687e9782e3874bull, 0x79a10673aa50d8e3ull,
    0xe4accf9e6211f420ull, 0x2520e71f87579071ull, 0x2bd5d3fd781a8a9bull, 0x00de4dcddd11c873ull,
    0xeaa9311c5a87392full, 0xdb748eb617bc40ffull, 0xaf579a8df620bf6full, 0x86a6e5da1b09c2b1ull,
    0xcc2fc30ac322a12eull, 0x355e2afec1f74267ull, 0x2d99c8f4c021a47bull, 0xbade4b4a9404cfc3ull,
    0xf7b518721d707d69ull, 0x3286b6587bf32c20ull, 0x0000b68886af270cull, 0xa115d6e4db8a9079ull,
    0x484f7e9c97b2e199ull, 0xccca7bb75713e301ull, 0xbf2584a62bb0f160ull, 0xade7e813625dbcc8ull,
    0x000070940d87955aull, 0x8ae69108139e626full, 0xbd776ad72fde38a2ull, 0xfb6b001fc2fcc0cfull,
    0xc7a474b8e67bc427ull, 0xbaf6f11610eb5d58ull, 0x09cb1f5b6de770d1ull, 0xb0b219e6977d4c47ull,
    0x00ccbc386ea7ad4aull, 0xcc849d0adf973f01ull, 0x73a3ef7d016af770ull, 0xc807d2d386bdbdfeull,
    0x7f2ac9966c791730ull, 0xd037a86bc6c504daull, 0xf3f17c661eaa609dull, 0xaca626b04daae687ull,
    0x755a99374f4a5b07ull, 0x90837ee65b2caedeull, 0x6ee8ad93fd560785ull, 0x0000d9e11053edd8ull,
    0x9e063bb2d21cdbd7ull, 0x07ab77f12a01d2b2ull, 0xec550255e6641b44ull, 0x78fb94a8449c14c6ull,
    0xc7510e1bc6c0f5f5ull, 0x0000320b36e4cae3ull, 0x827c33262c8b1a2dull, 0x14675f0b48ea4144ull,
    0x267bd3a6498decebull, 0xf1916ff982f5035eull, 0x86221b7ff434fb88ull, 0x9dbecee7386f49d8ull,
    0xea58f8cac80f8f4aull, 0x008d198692fc64d8ull, 0x6d38704fbabf9a36ull, 0xe032cb07d1e7be4cull,
    0x228d21f6ad450890ull, 0x635cb1bfc02589a5ull, 0x4620a1739ca2ce71ull, 0xa7e7dfe3aae5fb58ull,
    0x0c10ca932b3c0debull, 0x2727fee884afed7bull, 0xa2df1c6df9e2ab1full, 0x4dcdd1ac0774f523ull,
    0x000070ffad33e24eull, 0xa2ace87bc5977816ull, 0x9892275ab4286049ull, 0xc2861181ddf18959ull,
    0xbb9972a042483e19ull, 0xef70cd3766513078ull, 0x00000513abfc9864ull, 0xc058b61858c94083ull,
    0x09e850859725e0deull, 0x9197fb3bf83e7d94ull, 0x7e1e626d12b64bceull, 0x520c54507f7b57d1ull,
    0xbee1797174e22416ull, 0x6fd9ac3222e95587ull, 0x0023957c9adfbf3eull, 0xa01c7d7e234bbe15ull,
    0xaba2c758b8a38cbbull, 0x0d1fa0ceec3e2b30ull, 0x0bb6a58b7e60b991ull, 0x4333dd5b9fa26635ull,
    0xc2fd3b7d4001c1a3ull, 0xfb41802454731127ull, 0x65a56185a50d18cbull, 0xf67a02bd8784b54full,
    0x696f11dd67e65063ull, 0x00002022fca814abull, 0x8cd6be912db9d852ull, 0x695189b6e9ae8a57ull,
    0xee9453b50ada0c28ull, 0xd8fc5ea91a78845eull, 0xab86bf191a4aa767ull, 0x0000c6b5c86415e5ull,
    0x267310178e08a22eull, 0xed2d101b078bca25ull, 0x3b41ed84b226a8fbull, 0x13e622120f28dc06ull,
    0xa315f5ebfb706d26ull, 0x8816c34e3301baceull, 0xe9395b9cbb71fdaeull, 0x002ce9202e721648ull,
    0x4283db1d2bb3c91cull, 0xd77d461ad2b1a6a5ull, 0xe2ec17e46eeb866bull, 0xb8e0be4039fbc47cull,
    0xdea160c4d5299d04ull, 0x7eec86c8d28c3634ull, 0x2119ad129f98a399ull, 0xa6ccf46b61a283efull,
    0x2c52cedef658c617ull, 0x2db4871169acdd83ull, 0x0000f0d6f39ecbe9ull, 0x3dd5d8c98d2f9489ull,
    0x8a1872a22b01f584ull, 0xf282a4c40e7b3cf2ull, 0x8020ec2ccb1ba196ull, 0x6693b6e09e59e313ull,
    0x0000ce19cc7c83ebull, 0x20cb5735f6479c3bull, 0x762ebf3759d75a5bull, 0x207bfe823d693975ull,
    0xd77dc112339cd9d5ull, 0x9ba7834284627d03ull, 0x217dc513e95f51e9ull, 0xb27b1a29fc5e7816ull,
    0x00d5cd9831bb662dull, 0x71e39b806d75734cull, 0x7e572af006fb1a23ull, 0xa2734f2f6ae91f85ull,
    0xbf82c6b5022cddf2ull, 0x5c3beac60761a0deull, 0xcdc893bb47416998ull, 0x6d1085615c187e01ull,
    0x77f8ae30ac277c5dull, 0x917c6b81122a2c91ull, 0x5b75b699add16967ull, 0x0000cf6ae79a069bull,
    0xf3c40afa60de1104ull, 0x2063127aa59167c3ull, 0x621de62269d1894dull, 0xd188ac1de62b4726ull,
    0x107036e2154b673cull, 0x0000b85f28553a1dull, 0xf2ef4e4c18236f3dull, 0xd9d6de6611b9f602ull,
    0xa1fc7955fb47911cull, 0xeb85fd032f298dbdull, 0xbe27502fb3befae1ull, 0xe3034251c4cd661eull,
    0x441364d354071836ull, 0x0082b36c75f2983eull, 0xb145910316fa66f0ull, 0x021c069c9847caf7ull,
    0x2910dfc75a4b5221ull, 0x735b353e1c57a8b5ull, 0xce44312ce98ed96cull, 0xbc942e4506bdfa65ull,
    0xf05086a71257941bull, 0xfec3b215d351ceadull, 0x00ae1055e0144202ull, 0xf54b40846f42e454ull,
    0x00007fd9c8bcbcc8ull, 0xbfbd9ef317de9bfeull, 0xa804302ff2854e12ull, 0x39ce4957a5e5d8d4ull,
    0xffb9e2a45637ba84ull, 0x55b9ad1d9ea0818bull, 0x00008acbf319178aull, 0x48e2bfc8d0fbfb38ull,
    0x8be39841e848b5e8ull, 0x0e2712160696a08bull, 0xd51096e84b44242aull, 0x1101ba176792e13aull,
    0xc22e770f4531689dull, 0x1689eff272bbc56cull, 0x00a92a197f5650ecull, 0xbc765990bda1784eull,
    0xc61441e392fcb8aeull, 0x07e13a2ced31e4a0ull, 0x92cbe984234e9d4dull, 0x8f4ff572bb7d8ac5ull,
    0x0b9670c00b963bd0ull, 0x62955a581a03eb01ull, 0x645f83e5ea000254ull, 0x41fce516cd88f299ull,
    0xbbda9748da7a98cfull, 0x0000aab2fe4845faull, 0x19761b069bf56555ull, 0x8b8f5e8343b6ad56ull,
    0x3e5d1cfd144821d9ull, 0xec5c1e2ca2b0cd8full, 0xfaf7e0fea7fbb57full, 0x000000d3ba12961bull,
    0xda3f90178401b18eull, 0x70ff906de33a5febull, 0x0527d5a7c06970e7ull, 0x22d8e773607c13e9ull,
    0xc9ab70df643c3bacull, 0xeda4c6dc8abe12e3ull, 0xecef1f410033e78aull, 0x0024c2b274ac72cbull,
    0x06740d954fa900b4ull, 0x1d7a299b323d6304ull, 0xb3c37cb298cbead5ull, 0xc986e3c76178739bull,
    0x9fabea364b46f58aull, 0x6da214c5af85cc56ull, 0x17a43ed8b7a38f84ull, 0x6eccec511d9adbebull,
    0xf9cab30913335afbull, 0x4a5e60c5f415eed2ull, 0x00006967503672b4ull, 0x9da51d121454bb87ull,
    0x84321e13b9bbc816ull, 0xfb3d6fb6ab2fdd8dull, 0x60305eed8e160a8dull, 0xcbbf4b14e9946ce8ull,
    0x00004f63381b10c3ull, 0x07d5b7816fcc4e10ull, 0xe5a536726a6a8155ull, 0x57afb23447a07fddull,
    0x18f346f7abc9d394ull, 0x636dc655d61ad33dull, 0xcc8bab4939f7f3f6ull, 0x63c7a906c1dd187bull,
};

namespace {
// A gear hash depends on the last 64 bytes only (each step shifts one bit out).
constexpr size_t kHashWindow = 64;
}  // namespace

void Chunker::update(const void* data, size_t len, std::vector<size_t>* chunk_lengths) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t pos = 0;
  while (pos < len) {
    // No boundary may fall before kMinChunkSize, and the hash there depends only on the last 64
    // bytes: the bytes before kMinChunkSize - 65 need not be hashed at all (xet-core skips them
    // the same way; the boundaries are those of hashing every byte).
    if (pending_ + kHashWindow < kMinChunkSize) {
      const size_t skip = std::min(kMinChunkSize - pending_ - kHashWindow - 1, len - pos);
      pos += skip;
      pending_ += skip;
      if (pos == len) break;
    }
    const size_t limit = pos + std::min(len - pos, kMaxChunkSize - pending_);
    bool cut = false;
    uint64_t h = hash_;
    while (pos < limit) {
      h = (h << 1) + kGearTable[p[pos]];
      ++pos;
      ++pending_;
      if ((h & kGearMask) == 0 && pending_ >= kMinChunkSize) {
        cut = true;
        break;
      }
    }
    hash_ = h;
    if (cut || pending_ == kMaxChunkSize) {
      chunk_lengths->push_back(pending_);
      pending_ = 0;
      hash_ = 0;
    }
  }
}

std::optional<size_t> Chunker::finish() {
  const size_t last = pending_;
  pending_ = 0;
  hash_ = 0;
  if (last == 0) return std::nullopt;
  return last;
}

std::vector<size_t> chunk_boundaries(const void* data, size_t len) {
  Chunker c;
  std::vector<size_t> lengths;
  c.update(data, len, &lengths);
  if (auto last = c.finish()) lengths.push_back(*last);
  size_t offset = 0;
  for (auto& l : lengths) {
    offset += l;
    l = offset;
  }
  return lengths;
}

}  // namespace hubfs::xet
