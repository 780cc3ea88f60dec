// Where the fake NCCL's rank processes meet at each collective: a file mapped shared
// (GPUACCT_SIM_NCCL_RENDEZVOUS), one cell per (communicator key, sequence number mod kRing,
// rank).  A rank posts its kernel's true GPU start and its link bandwidth, then waits -- in real
// time, which costs no simulated time -- until every rank of the communicator posted for that
// sequence number.  Ranks of one communicator are never more than one instance apart (each
// waits for all), so a ring of kRing cells per communicator is never overrun.
#ifndef GPUACCT_TESTS_SIM_FAKE_NCCL_RENDEZVOUS_H_
#define GPUACCT_TESTS_SIM_FAKE_NCCL_RENDEZVOUS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace simnccl {

struct Arrival {
  uint64_t true_start = 0;  // the rank's kernel start on the true clock
  uint64_t link_bytes_per_us = 0;
};

class Rendezvous {
 public:
  static constexpr int kMaxRanks = 64;
  static constexpr int kMaxKeys = 16;  // communicators (x2: collectives and p2p groups)
  static constexpr int kRing = 64;

  ~Rendezvous();
  // Maps `path` (created zero-filled by the first rank to open it; a fresh path per job).
  // Empty string on success, else why not.
  std::string open(const std::string& path);
  // Posts this rank's arrival for (key, seq) and waits for all `nranks`; fills `all` (index =
  // rank).  Empty string on success, else why not (names the ranks that did not arrive).
  std::string meet(uint64_t key, uint64_t seq, int rank, int nranks, const Arrival& mine,
                   double timeout_s, std::vector<Arrival>* all);

 private:
  struct Cell;
  struct Layout;
  int slot_for(uint64_t key);
  Layout* map_ = nullptr;
};

}  // namespace simnccl

#endif  // GPUACCT_TESTS_SIM_FAKE_NCCL_RENDEZVOUS_H_
