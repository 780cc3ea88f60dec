// CRC-32C (Castagnoli): polynomial 0x1EDC6F41 (0x82F63B78 bit-reflected), initial value and
// final XOR 0xFFFFFFFF.  The checksum of iSCSI (RFC 3720), ext4 and Btrfs metadata, and of the
// SSE4.2 / ARMv8 crc32c instructions; it detects every error of up to 5 bits in blocks of a few
// KiB and all burst errors up to 32 bits.  Check value: crc32c("123456789") == 0xE3069283.
// Portable slicing-by-8 (about 2 GB/s per core), no dependency.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuacct {

// CRC-32C of `bytes` bytes at `data`.  Streaming: crc32c(b, n, crc32c(a, m)) is the CRC of a
// followed by b.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc_so_far = 0);

}  // namespace gpuacct
