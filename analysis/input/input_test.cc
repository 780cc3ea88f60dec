// The front door on what a killed job leaves behind: its recording cut anywhere, and its step
// stream without the closing line (analysis/input/input.h, step_stream_reader.h); and on a
// running job's stream (analysis/input/live_writer.h).
#include "analysis/input/input.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <gtest/gtest.h>

#include "analysis/import/recording.h"
#include "analysis/import/synthetic.h"
#include "analysis/report/report.h"

namespace gpuacct {
namespace {

using nlohmann::json;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<json> rows_json(const std::vector<StepRow>& rows) {
  std::vector<json> out;
  for (const StepRow& r : rows) out.push_back(step_row_to_json(r));
  return out;
}

// A live run in miniature, the way inject/pipeline/pipeline.cc runs: events gathered into a batch;
// at each watermark the batch and the watermark are recorded (the watermark flushes the file to the
// kernel), then the live accountant gets the batch and the watermark.  After each watermark it
// keeps what a SIGKILL right then would leave: the temporary file's bytes, and the rows the live
// run had finalised (streamed).
class LiveRun final : public EventSink {
 public:
  struct Kill {
    std::string file;           // the recording as the kill leaves it
    std::vector<StepRow> rows;  // the rows finalised live by then
  };

  LiveRun(NameTable& names, const std::string& path) : names_(names) {
    EXPECT_TRUE(writer_.open(path).ok());
  }
  void on_gpu_op(const GpuOp& op) override { batch_.gpu_ops.push_back(op); }
  void on_api_call(const HostApiCall& c) override { batch_.api_calls.push_back(c); }
  void on_range(const HostRange& r) override { batch_.ranges.push_back(r); }
  void on_marker(const Marker& m) override { batch_.markers.push_back(m); }
  void on_watermark(TimeNs w) override {
    EXPECT_TRUE(writer_.write_new_names(names_).ok());
    EXPECT_TRUE(writer_.write_batch(batch_).ok());
    EXPECT_TRUE(writer_.write_watermark(w).ok());
    acc_.add(batch_);
    batch_ = EventBatch{};
    acc_.advance_watermark(w);
    kills_.push_back(
        Kill{read_bytes(writer_.path() + ".tmp." + std::to_string(::getpid())), acc_.rows()});
  }
  const std::vector<Kill>& kills() const { return kills_; }
  void abandon() { writer_.abandon(); }

 private:
  NameTable& names_;
  RecordingWriter writer_;
  StepAccountant acc_;
  EventBatch batch_;
  std::vector<Kill> kills_;
};

StatusOr<InputReport> report_of_bytes(const std::string& bytes) {
  NameTable names;
  AccountingConfig cfg;
  cfg.warmup_steps = AccountingConfig::kWarmupBySource;
  return report_input(Input::from_buffer(bytes, "killed.gpuacct"), cfg, names);
}

// A job killed at any watermark: `gpuacct analyze` of what its recording holds gives exactly
// the rows the live run had finalised by then -- every step finished before the kill, none
// invented -- and says what was cut (stat, section, one line).  Before, every one was refused.
TEST(Input, AKilledRunsRecordingGivesTheRowsFinishedBeforeTheKill) {
  auto spec = SyntheticSpec::preset("data_bound");
  ASSERT_TRUE(spec.ok());
  spec->steps = 30;
  spec->shuffle_batch = 64;
  NameTable names;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gpuacct_input_killed_" + std::to_string(::getpid()) + ".gpuacct"))
                               .string();
  LiveRun live(names, path);
  generate_synthetic(*spec, names, live);
  live.abandon();
  ASSERT_GT(live.kills().size(), 10u);
  size_t with_rows = 0;
  for (const LiveRun::Kill& kill : live.kills()) {
    // Cut where the kill left it, and a few bytes more: a chunk half written after it.
    for (const std::string& file : {kill.file, kill.file + std::string(20, '\x02')}) {
      auto rep = report_of_bytes(file);
      ASSERT_TRUE(rep.ok()) << rep.status().message();
      EXPECT_EQ(rows_json(rep->rows), rows_json(kill.rows)) << "killed at " << file.size();
      EXPECT_FALSE(rep->cut_off.empty());
      ASSERT_TRUE(rep->report.contains("cut_off"));
      EXPECT_EQ(rep->report["cut_off"]["bytes_cut"], file.size() - kill.file.size());
      EXPECT_TRUE(rep->report["data_loss"].get<bool>());
      if (!kill.rows.empty()) ++with_rows;
    }
  }
  EXPECT_GT(with_rows, 10u);
}

// A stream as the library writes it (inject/output/step_stream.h): header, rows, a provisional
// summary line, more rows, and -- when the run finished -- the closing summary line.
struct Stream {
  std::vector<StepRow> rows;
  std::string text;
};
Stream make_stream(bool finished, const std::string& tail = "") {
  auto spec = SyntheticSpec::preset("launch_bound");
  NameTable names;
  StepAccountant acc;
  generate_synthetic(*spec, names, acc);
  acc.finish();
  Stream s;
  s.rows = acc.rows();
  RunMetadata meta;
  meta.source = "injected";
  s.text = R"({"schema":"gpuacct.steps/1","source":"injected","hostname":"h","pid":42,"rank":3})"
           "\n";
  auto summary_line = [&](size_t n, bool provisional) {
    const std::vector<StepRow> before(s.rows.begin(), s.rows.begin() + static_cast<long>(n));
    json rep = summary_report(before, acc.stats(), acc.config(), meta);
    json stats = json::array();
    for (const json& st : rep["stats"]) {
      if (st["value"] != 0) stats.push_back({{"name", st["name"]}, {"value", st["value"]}});
    }
    return json{{"summary", rep["summary"]},
                {"verdict", rep["verdict"]},
                {"provisional", provisional},
                {"step_rows", n},
                {"stats", stats}}
        .dump();
  };
  for (size_t i = 0; i < s.rows.size(); ++i) {
    s.text += step_row_to_json(s.rows[i]).dump() + "\n";
    if (i == 5) s.text += summary_line(i + 1, true) + "\n";
  }
  if (finished) s.text += summary_line(s.rows.size(), false) + "\n";
  s.text += tail;
  return s;
}

StatusOr<InputReport> report_of_stream(const std::string& text) {
  NameTable names;
  AccountingConfig cfg;
  cfg.warmup_steps = AccountingConfig::kWarmupBySource;
  const Input input = Input::from_buffer(text, "run.steps.jsonl");
  EXPECT_EQ(input.format(), InputFormat::kStepStream);
  return report_input(input, cfg, names);
}

TEST(Input, StepRowsRoundTripThroughTheirJson) {
  const Stream s = make_stream(true);
  ASSERT_GT(s.rows.size(), 10u);
  for (const StepRow& r : s.rows) {
    auto back = step_row_from_json(step_row_to_json(r));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(step_row_to_json(back.value()), step_row_to_json(r));
  }
  StepRow host;
  host.device = kHostOnlyDevice;
  EXPECT_EQ(step_row_from_json(step_row_to_json(host))->device, kHostOnlyDevice);
  json bad = step_row_to_json(s.rows[0]);
  bad["kernels"] = "many";
  EXPECT_EQ(step_row_from_json(bad).status().message(),
            "field 'kernels' is missing or of the wrong type");
  bad = step_row_to_json(s.rows[0]);
  bad["categories"].erase("compute");
  EXPECT_FALSE(step_row_from_json(bad).ok());
  // Declared work round-trips; a row written before it (no such keys) reads as none declared.
  StepRow worked = s.rows[0];
  worked.tokens = 262144.5;
  worked.samples = 3;
  EXPECT_DOUBLE_EQ(step_row_from_json(step_row_to_json(worked))->tokens, 262144.5);
  EXPECT_DOUBLE_EQ(step_row_from_json(step_row_to_json(worked))->samples, 3);
  json old = step_row_to_json(worked);
  old.erase("tokens");
  old.erase("samples");
  ASSERT_TRUE(step_row_from_json(old).ok());
  EXPECT_EQ(step_row_from_json(old)->tokens, 0);
  old["samples"] = -1;
  EXPECT_EQ(step_row_from_json(old).status().message(),
            "field 'samples' is missing or of the wrong type");
  // GPUACCT_SAMPLE: an untraced row says so and reads back so; a traced row has no key.
  StepRow untraced = s.rows[0];
  untraced.sampled = false;
  EXPECT_FALSE(step_row_to_json(s.rows[0]).contains("sampled"));
  EXPECT_EQ(step_row_to_json(untraced)["sampled"], false);
  EXPECT_FALSE(step_row_from_json(step_row_to_json(untraced))->sampled);
  bad = step_row_to_json(untraced);
  bad["sampled"] = 0;
  EXPECT_EQ(step_row_from_json(bad).status().message(),
            "field 'sampled' is missing or of the wrong type");
}

// A finished stream: its rows summarised are the closing line's summary and verdict.
TEST(Input, AStepStreamIsSummarisedFromAllItsRows) {
  const Stream s = make_stream(true);
  auto rep = report_of_stream(s.text);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rows_json(rep->rows), rows_json(s.rows));
  const json last = json::parse(s.text.substr(s.text.rfind('\n', s.text.size() - 2) + 1));
  ASSERT_EQ(last["provisional"], false);
  EXPECT_EQ(rep->report["summary"], last["summary"]);
  EXPECT_EQ(rep->report["verdict"], last["verdict"]);
  EXPECT_EQ(rep->report["steps"].size(), s.rows.size());
  EXPECT_EQ(rep->report["run"]["rank"], 3);
  EXPECT_EQ(rep->report["run"]["hostname"], "h");
  EXPECT_TRUE(rep->cut_off.empty());
  EXPECT_FALSE(rep->report.contains("cut_off"));
  EXPECT_TRUE(render_terminal_summary(rep->report).ok());
}

// A killed job's stream: no closing line, perhaps a cut last line: every whole row is
// summarised (not the last provisional summary's 6), the cut is said and counted.
TEST(Input, AKilledJobsStepStreamGivesEveryRow) {
  const Stream s = make_stream(false, R"({"step_index": 99, "step_num)");
  auto rep = report_of_stream(s.text);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rows_json(rep->rows), rows_json(s.rows));
  EXPECT_EQ(rep->report["summary"]["rows"], s.rows.size() - 2);  // warm-up as the rows say
  EXPECT_EQ(rep->report["summary"]["warmup_steps"], 2);
  ASSERT_TRUE(rep->report.contains("cut_off"));
  EXPECT_EQ(rep->report["cut_off"]["bytes_cut"], 28);
  EXPECT_EQ(rep->report["cut_off"]["rows_in_last_summary"], 6);
  EXPECT_EQ(rep->report["cut_off"]["finished"], false);
  EXPECT_NE(rep->cut_off.find("no closing summary line"), std::string::npos) << rep->cut_off;
  EXPECT_TRUE(rep->report["data_loss"].get<bool>());
  bool counted = false;
  for (const json& st : rep->report["stats"]) {
    if (st["name"] == "inputs_cut_off") counted = st["value"] == 1;
  }
  EXPECT_TRUE(counted);
  // A gap line (a full disk) counts its rows as lost; a torn line in the middle is skipped.
  const std::string gap = R"({"gap":{"rows_lost":3,"first_step_index":7,"last_step_index":9}})";
  const Stream g = make_stream(false, gap + "\n{\"step_ind\n");
  rep = report_of_stream(g.text);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  for (const json& st : rep->report["stats"]) {
    if (st["name"] == "stream_rows_lost") {
      EXPECT_EQ(st["value"], 3);
    }
    if (st["name"] == "importer_events_skipped") {
      EXPECT_EQ(st["value"], 1);
    }
  }
}

// A job still running: its stream has no closing line yet, and the process its header names
// (this host, this test's pid) holds it open -- rows so far, nothing lost, said so.  Once the
// writer lets go without the closing line, the same file is a killed job's cut.
TEST(Input, AStreamItsLiveWriterHoldsOpenIsInProgressNotCut) {
  Stream s = make_stream(false);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const json header = {{"schema", "gpuacct.steps/1"}, {"source", "injected"},
                       {"hostname", host}, {"pid", static_cast<int64_t>(getpid())},
                       {"rank", 0}};
  s.text = header.dump() + s.text.substr(s.text.find('\n'));
  const std::string path = testing::TempDir() + "/in_progress.steps.jsonl";
  auto report_of_file = [&] {
    NameTable names;
    AccountingConfig cfg;
    cfg.warmup_steps = AccountingConfig::kWarmupBySource;
    auto input = Input::open(path);
    EXPECT_TRUE(input.ok());
    return report_input(*input, cfg, names);
  };
  auto writer = std::make_unique<std::ofstream>(path, std::ios::binary);
  *writer << s.text;
  writer->flush();
  auto rep = report_of_file();
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rows_json(rep->rows), rows_json(s.rows));
  ASSERT_TRUE(rep->report.contains("in_progress")) << rep->report.dump();
  EXPECT_EQ(rep->report["in_progress"]["pid"], static_cast<int64_t>(getpid()));
  EXPECT_FALSE(rep->report.contains("cut_off"));
  EXPECT_FALSE(rep->report["data_loss"].get<bool>());
  EXPECT_NE(rep->cut_off.find("still being written"), std::string::npos) << rep->cut_off;
  writer.reset();  // the writer lets go without its closing line
  rep = report_of_file();
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->report.contains("cut_off"));
  EXPECT_FALSE(rep->report.contains("in_progress"));
  EXPECT_TRUE(rep->report["data_loss"].get<bool>());
  EXPECT_NE(rep->cut_off.find("no closing summary line"), std::string::npos) << rep->cut_off;
  std::remove(path.c_str());
}

TEST(Input, BadStepStreamsGiveClearErrors) {
  EXPECT_NE(Input::from_buffer("{\"schema\":\"gpuacct.steps/2\"}\n", "x").format(),
            InputFormat::kStepStream);
  const Stream s = make_stream(true);
  std::string broken = s.text;
  const size_t at = broken.find("\"kernels\":");
  broken.replace(at, 10, "\"kernelz\":");
  auto rep = report_of_stream(broken);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(),
            "run.steps.jsonl: line 2: field 'kernels' is missing or of the wrong type");
  // Events, not rows: a step stream cannot be accounted again (a timeline needs events).
  NameTable names;
  auto accounted = account_input(Input::from_buffer(s.text, "run.steps.jsonl"), {}, names);
  ASSERT_FALSE(accounted.ok());
  EXPECT_NE(accounted.status().message().find("holds accounted step rows"), std::string::npos);
}

}  // namespace
}  // namespace gpuacct
