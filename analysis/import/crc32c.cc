#include "analysis/import/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

namespace gpuacct {
namespace {

static_assert(std::endian::native == std::endian::little, "the 8-byte step reads little-endian");

constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;

// kTables[0] is the byte-at-a-time table; kTables[k][b] is the CRC of byte b followed by k
// zero bytes, so eight table lookups advance the CRC by eight bytes at once.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (kReflectedPolynomial & (0u - (c & 1u)));
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
  }
  return t;
}
constexpr auto kTables = make_tables();

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc_so_far) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc_so_far;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t word = 0;
    std::memcpy(&word, p, sizeof word);
    const uint32_t lo = static_cast<uint32_t>(word) ^ c;
    const auto hi = static_cast<uint32_t>(word >> 32);
    c = kTables[7][lo & 0xffu] ^ kTables[6][(lo >> 8) & 0xffu] ^ kTables[5][(lo >> 16) & 0xffu] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xffu] ^ kTables[2][(hi >> 8) & 0xffu] ^
        kTables[1][(hi >> 16) & 0xffu] ^ kTables[0][hi >> 24];
  }
  for (; bytes > 0; --bytes, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xffu];
  return ~c;
}

}  // namespace gpuacct
