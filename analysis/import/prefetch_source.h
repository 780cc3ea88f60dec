// A ByteSource that reads its inner source on a background thread, ahead of the reader.
//
// Inflating gzip and tokenizing JSON each take one core; on two threads a trace is read in
// about the time of the slower of the two instead of their sum.  The thread fills fixed-size
// blocks and hands them over through a bounded queue (kBlocks blocks of kBlockBytes: memory
// does not grow with the input); the reader copies out of the oldest block (read()) or reads
// it in place (lend(): byte_source.h; each block has headroom for the partial value carried
// over from the block before, and goes back to the thread only after that carry was copied).
//
// Contract: the bytes and errors are exactly the inner source's, in the same order: an error
// the inner source returned after N bytes is returned after those N bytes.  If the thread
// cannot be started the inner source is read on the caller's thread (no error: only slower).
// Destroying the source stops the thread (it may be mid-read of one block).
#pragma once

#include <memory>

#include "analysis/import/byte_source.h"

namespace gpuacct {

std::unique_ptr<ByteSource> prefetch_source(std::unique_ptr<ByteSource> inner);

}  // namespace gpuacct
