#include "analysis/job/job_export.h"

#include <cstdio>
#include <filesystem>

#include "analysis/model/collective_rows.h"
#include "analysis/report/report.h"

namespace gpuacct {
namespace {

std::string who_fields(const ExportRank& who) {
  return csv_field(who.job != nullptr ? *who.job : std::string()) + ',' +
         csv_field(who.host != nullptr ? *who.host : std::string()) + ',' +
         std::to_string(who.rank) + ',';
}

}  // namespace

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Status JobExport::open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create export directory " + dir + ": " + ec.message());
  GPUACCT_RETURN_IF_ERROR(steps_.open(dir + "/" + kJobStepsCsv));
  GPUACCT_RETURN_IF_ERROR(collectives_.open(dir + "/" + kJobCollectivesCsv));
  write(steps_, "job,host,rank," + step_rows_csv_header() +
                    ",clock_offset_ns,job_step_ns,waited_ns,late_ns\n");
  // The rows file's columns (collective_rows.h) as collective_row_csv writes them.
  write(collectives_, "job,host,rank," + std::string(collective_rows_columns()) +
                          ",arrival_ns,last_rank,wait_ns,transfer_ns,busbw_gbs\n");
  return error_;
}

void JobExport::write(OutputFile& file, const std::string& line) {
  if (!error_.ok()) return;
  error_ = file.write(line);
}

void JobExport::step(const ExportRank& who, const StepRow& row, int64_t clock_offset_ns,
                     int64_t job_step_ns, int64_t waited_ns, int64_t late_ns) {
  line_ = who_fields(who);
  line_ += step_row_csv(row);
  line_ += ',' + std::to_string(clock_offset_ns) + ',' + std::to_string(job_step_ns) + ',' +
           std::to_string(waited_ns) + ',' + std::to_string(late_ns) + '\n';
  write(steps_, line_);
  ++step_lines_;
}

void JobExport::collective(const ExportRank& who, const CollectiveRecord& record, int last_rank,
                           int64_t wait_ns, int64_t transfer_ns, double busbw_gbs) {
  char bw[32] = "";
  if (busbw_gbs > 0) std::snprintf(bw, sizeof bw, "%.3f", busbw_gbs);
  line_ = who_fields(who);
  line_ += collective_row_csv(record);
  line_ += ',' + std::to_string(record.gpu_start) + ',' + std::to_string(last_rank) + ',' +
           std::to_string(wait_ns) + ',' + std::to_string(transfer_ns) + ',' + bw + '\n';
  write(collectives_, line_);
  ++collective_lines_;
}

Status JobExport::finish() {
  if (!error_.ok()) {
    steps_.abandon();
    collectives_.abandon();
    return error_;
  }
  Status st = steps_.commit();
  if (!st.ok()) {
    collectives_.abandon();
    return st;
  }
  st = collectives_.commit();
  if (!st.ok()) std::remove(steps_.path().c_str());
  return st;
}

}  // namespace gpuacct
