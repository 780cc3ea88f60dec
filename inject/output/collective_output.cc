#include "inject/output/collective_output.h"

#include <limits>
#include <utility>

#include "inject/log.h"

namespace gpuacct::inject {

CollectiveOutput::CollectiveOutput(std::string path, std::function<RunMetadata()> metadata,
                                   Stats* stats)
    : path_(std::move(path)),
      metadata_(std::move(metadata)),
      stats_(stats),
      kernel_order_(std::make_unique<KernelOrderIdentity>(
          [this](const CollectiveRecord& r) { to_steps(r); })),
      steps_([this](const CollectiveRecord& r) { write(r); }) {}

void CollectiveOutput::choose(CollectiveSource mode) {
  if (mode_ != CollectiveSource::kNone) return;
  mode_ = mode;
  // The plugin names collectives: the kernel-order numbering is no longer needed.  Not
  // destroyed here: this may run inside its own callback; add() / finish() drop it.
}

void CollectiveOutput::add(const std::vector<PluginRecord>& records, const EventBatch& batch) {
  if (!records.empty() && mode_ == CollectiveSource::kNone) choose(CollectiveSource::kNcclPlugin);
  if (mode_ == CollectiveSource::kKernelOrder) {
    plugin_records_ignored_ += static_cast<int64_t>(records.size());
  } else {
    matcher_.add_records(records);
    // Launch calls matter once NCCL initialised the plugin (before any collective's launch):
    // a run without NCCL costs the matcher nothing.
    if (matcher_.saw_records() || nccl_plugin_counters().communicators > 0) {
      matcher_.add_events(batch);
    }
  }
  if (mode_ == CollectiveSource::kNcclPlugin) {
    kernel_order_.reset();
    return;
  }
  for (const HostApiCall& c : batch.api_calls) kernel_order_->on_api_call(c);
  for (const GpuOp& op : batch.gpu_ops) kernel_order_->on_gpu_op(op);
}

void CollectiveOutput::on_watermark(int64_t watermark) {
  if (mode_ != CollectiveSource::kKernelOrder) {
    decided_.clear();
    matcher_.poll(watermark, /*final=*/false, decided_, *stats_);
    for (const CollectiveRecord& r : decided_) to_steps(r);
  }
  if (kernel_order_ != nullptr) kernel_order_->on_watermark(watermark);
  if (mode_ == CollectiveSource::kNcclPlugin) kernel_order_.reset();
  // The rows so far reach the kernel each tick: a job killed now leaves them readable (the
  // temporary file, read as cut off).  A failure shows again, and is said, at finish().
  if (writer_open_ && writer_.rows() != rows_flushed_) {
    (void)writer_.flush();
    rows_flushed_ = writer_.rows();
  }
}

void CollectiveOutput::on_step_row(const StepRow& row) {
  steps_.add_row(row);
}

// A record ready for its step: the first one chooses the file's identity.
void CollectiveOutput::to_steps(const CollectiveRecord& record) {
  if (record.source == CollectiveSource::kKernelOrder) {
    if (mode_ == CollectiveSource::kNone) {
      choose(matcher_.saw_records() ? CollectiveSource::kNcclPlugin
                                    : CollectiveSource::kKernelOrder);
    }
    if (mode_ != CollectiveSource::kKernelOrder) return;
  } else {
    choose(CollectiveSource::kNcclPlugin);
    if (mode_ != CollectiveSource::kNcclPlugin) return;
  }
  steps_.add(record);
}

std::string CollectiveOutput::kernel_order_note() const {
  const NcclPluginCounters c = nccl_plugin_counters();
  std::string why =
      c.communicators == 0
          ? "NCCL never initialised gpuacct as its profiler plugin (NCCL older than 2.23, "
            "NCCL_PROFILER_PLUGIN=none, or CUDA loaded gpuacct after NCCL read it)"
          : "NCCL initialised gpuacct as its profiler plugin but sent no collective event";
  return why +
         "; collectives are NCCL kernels numbered in order per stream, assuming every rank "
         "launches one communicator's collectives in the same order on one stream";
}

void CollectiveOutput::write(const CollectiveRecord& record) {
  if (!writer_open_ && !writer_failed_) {
    CollectiveRowsHeader header;
    header.metadata = metadata_();
    header.identity = mode_;
    if (mode_ == CollectiveSource::kKernelOrder) header.identity_note = kernel_order_note();
    const Status st = writer_.open(path_, header, OutputPolicy::kOwnFilesOnly);
    if (!writer_.note().empty()) log_line(writer_.note());
    writer_open_ = st.ok();
    writer_failed_ = !st.ok();
    if (!st.ok()) log_line(st.message() + "; no collectives file is written");
  }
  if (writer_failed_) {
    stats_->add(Stat::collective_rows_lost);
    return;
  }
  writer_.append(record);
}

void CollectiveOutput::finish() {
  if (mode_ != CollectiveSource::kKernelOrder) {
    decided_.clear();
    matcher_.poll(std::numeric_limits<int64_t>::max(), /*final=*/true, decided_, *stats_);
    for (const CollectiveRecord& r : decided_) to_steps(r);
  }
  if (kernel_order_ != nullptr) kernel_order_->finish();
  kernel_order_.reset();
  steps_.finish();
  if (plugin_records_ignored_ > 0) {
    log_line(std::to_string(plugin_records_ignored_) +
             " NCCL profiler-plugin records came after the collectives file had started as "
             "kernel_order; they are not in it");
  }
  if (!writer_open_) return;
  const int64_t lost_before = writer_.rows_lost();
  const Status st = writer_.finish();
  if (!writer_.note().empty()) log_line(writer_.note());
  if (!st.ok()) {
    log_line(st.message() + "; the collectives file is not written");
    stats_->add(Stat::collective_rows_lost, writer_.rows());
  }
  stats_->add(Stat::collective_rows_lost, lost_before);
}

}  // namespace gpuacct::inject
