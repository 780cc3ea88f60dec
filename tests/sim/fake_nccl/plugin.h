// The fake NCCL's side of the profiler plugin (simnccl.h): finds the plugin, picks the newest
// interface version both sides know, and turns the fake's events into that version's
// descriptors.  Every call is skipped when the plugin did not ask for the event type (its
// activation mask) or the version has no such event.
#ifndef GPUACCT_TESTS_SIM_FAKE_NCCL_PLUGIN_H_
#define GPUACCT_TESTS_SIM_FAKE_NCCL_PLUGIN_H_

#include <cstdint>
#include <string>

namespace simnccl {

// What an operation looks like to the plugin (one collective, or one send / receive).
struct OpInfo {
  const char* func = "";      // "AllReduce", "AllGather", "ReduceScatter", "Send", "Recv"
  uint8_t func_id = 0;        // ncclFunc numbering (v1)
  size_t count = 0;
  const char* datatype = "";  // "ncclBfloat16", ...
  uint8_t datatype_id = 0;    // ncclDataType_t (v1)
  uint64_t bytes = 0;
  uint64_t seq = 0;           // collectives: the communicator's sequence number
  int peer = -1;              // p2p
  void* stream = nullptr;
};

// The communicator as the plugin knows it.
struct CommInfo {
  uint64_t hash = 0;
  std::string name;
  int nranks = 1;
  int rank = 0;
  int nnodes = 1;
};

constexpr uint8_t kChannels = 2;  // nChannels of every operation: KernelCh events per operation
extern const char* const kAlgo;   // "RING"
extern const char* const kProto;  // "SIMPLE"

class Plugin {
 public:
  // Loads NCCL_PROFILER_PLUGIN once per process; version() is 0 when there is none (unset,
  // "none", not loadable, no table, or GPUACCT_SIM_NCCL_PROFILER_API=0).  `note` says which.
  static Plugin& get();
  int version() const { return version_; }
  const std::string& note() const { return note_; }
  const std::string& path() const { return path_; }

  // Per communicator.  init returns false when the plugin refused (the communicator then runs
  // without it, as NCCL disables the plugin).
  bool init(const CommInfo& comm, void** context, uint64_t* mask) const;
  void finalize(void* context) const;

  // Events; each returns the plugin's handle (nullptr when not emitted).
  void* start_group(void* ctx, const CommInfo& comm, uint64_t mask) const;
  void* start_group_api(void* ctx, const CommInfo& comm, uint64_t mask, int depth) const;
  void* start_op_api(void* ctx, const CommInfo& comm, uint64_t mask, const OpInfo& op,
                     void* parent) const;
  void* start_kernel_launch(void* ctx, const CommInfo& comm, uint64_t mask, void* parent,
                            void* stream) const;
  // A collective (op.func not Send / Recv) or a p2p event.  parent: the v5 API event, or the
  // group; group: the group event (v5's parentGroup).
  void* start_op(void* ctx, const CommInfo& comm, uint64_t mask, const OpInfo& op, void* parent,
                 void* group) const;
  // KernelCh: start (v3: no times; v4+: gpu_start as pTimer) ... stop (v4+: gpu_end through
  // recordEventState(KernelChStop) first).
  void* start_kernel_ch(void* ctx, const CommInfo& comm, uint64_t mask, void* parent,
                        uint8_t channel, uint64_t gpu_start) const;
  void stop_kernel_ch(void* handle, uint64_t gpu_end) const;
  void record_state(void* handle, int state) const;
  void stop(void* handle) const;

 private:
  Plugin();
  int version_ = 0;
  const void* table_ = nullptr;
  std::string path_;
  std::string note_;
};

}  // namespace simnccl

#endif  // GPUACCT_TESTS_SIM_FAKE_NCCL_PLUGIN_H_
