#include "analysis/model/collective_rows.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "analysis/model/json_text.h"

namespace gpuacct {

namespace {

using nlohmann::json;

constexpr std::string_view kHeaderPrefix = "# gpuacct.collectives/";
constexpr std::string_view kTrailerPrefix = "# end ";
// Files written before kernel_ops existed end at `source`: read alike, kernel_ops unknown (0).
constexpr std::string_view kColumnsBefore =
    "step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,"
    "host_enqueue_ns,gpu_start_ns,gpu_end_ns,source";
constexpr std::string_view kColumns =
    "step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,"
    "host_enqueue_ns,gpu_start_ns,gpu_end_ns,source,kernel_ops";
// A line longer than this is not one this format writes (a row is < 300 bytes, a header a few
// KiB): the reader skips it instead of buffering it, so garbage cannot grow its memory.
constexpr size_t kMaxLineBytes = size_t{1} << 20;

bool is_name_byte(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '+' || c == '-';
}

size_t short_name_length(const ShortName& name) {
  return strnlen(name.text, sizeof(name.text) - 1);
}

template <typename Int>
void append_int(std::string& out, Int value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, static_cast<size_t>(result.ptr - digits));
}

void append_hex16(std::string& out, uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  char digits[16];
  for (int i = 15; i >= 0; --i) {
    digits[i] = kHex[value & 0xF];
    value >>= 4;
  }
  out.append(digits, sizeof(digits));
}

void append_name(std::string& out, const ShortName& name) {
  const size_t n = short_name_length(name);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(name.text[i]);
    out.push_back(is_name_byte(c) ? static_cast<char>(c) : '_');
  }
}

void append_row(std::string& out, const CollectiveRecord& r) {
  append_int(out, r.step_index);
  out.push_back(',');
  append_hex16(out, r.comm_hash);
  out.push_back(',');
  append_int(out, r.seq);
  out.push_back(',');
  out.append(to_string(r.type));
  out.push_back(',');
  if (r.bytes != 0) append_int(out, r.bytes);
  out.push_back(',');
  append_name(out, r.datatype);
  out.push_back(',');
  append_name(out, r.algo);
  out.push_back(',');
  append_name(out, r.proto);
  out.push_back(',');
  if (r.rank != -1) append_int(out, r.rank);
  out.push_back(',');
  if (r.nranks != 0) append_int(out, r.nranks);
  out.push_back(',');
  append_int(out, r.device);
  out.push_back(',');
  append_int(out, r.stream);
  out.push_back(',');
  append_int(out, r.host_enqueue);
  out.push_back(',');
  append_int(out, r.gpu_start);
  out.push_back(',');
  append_int(out, r.gpu_end);
  out.push_back(',');
  out.append(to_string(r.source));
  out.push_back(',');
  if (r.kernel_ops != 0) append_int(out, r.kernel_ops);
}

// ---- reading -------------------------------------------------------------------------------

// A cursor over one row line: each field is parsed where it stands, then comma() steps over
// the comma that must follow it.  One pass, no allocation: the job view reads tens of millions
// of rows, so no splitting into strings and no JSON per row.
class RowCursor {
 public:
  explicit RowCursor(std::string_view line) : at_(line.data()), end_(line.data() + line.size()) {}

  bool comma() {
    if (at_ == end_ || *at_ != ',') return false;
    ++at_;
    return true;
  }
  // A decimal integer in Int's range ('-' only for signed types, no '+', no spaces).
  template <typename Int>
  bool number(Int* out) {
    const char* p = at_;
    bool negative = false;
    if constexpr (std::is_signed_v<Int>) {
      if (p < end_ && *p == '-') {
        negative = true;
        ++p;
      }
    }
    const char* digits = p;
    uint64_t value = 0;
    while (p < end_ && static_cast<unsigned char>(*p - '0') < 10) {
      if (__builtin_mul_overflow(value, uint64_t{10}, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(*p - '0'), &value))
        return false;
      ++p;
    }
    if (p == digits) return false;
    using Unsigned = std::make_unsigned_t<Int>;
    const auto max = static_cast<uint64_t>(std::numeric_limits<Int>::max());
    if (!negative) {
      if (value > max) return false;
      *out = static_cast<Int>(value);
    } else {
      if (value > max + 1) return false;  // |min| = max + 1
      *out = static_cast<Int>(static_cast<Unsigned>(0) - static_cast<Unsigned>(value));
    }
    at_ = p;
    return true;
  }
  // An empty field is `unknown`.
  template <typename Int>
  bool optional_number(Int unknown, Int* out) {
    if (at_ == end_ || *at_ == ',') {
      *out = unknown;
      return true;
    }
    return number(out);
  }
  bool hex(uint64_t* out) {
    const auto result = std::from_chars(at_, end_, *out, 16);
    if (result.ec != std::errc() || result.ptr == at_ || result.ptr - at_ > 16) return false;
    at_ = result.ptr;
    return true;
  }
  bool name(ShortName* out) {
    const char* start = at_;
    while (at_ < end_ && *at_ != ',') {
      if (!is_name_byte(static_cast<unsigned char>(*at_))) return false;
      ++at_;
    }
    const auto n = static_cast<size_t>(at_ - start);
    if (n >= sizeof(out->text)) return false;
    std::memcpy(out->text, start, n);
    return true;
  }
  std::string_view word() {
    const char* start = at_;
    while (at_ < end_ && *at_ != ',') ++at_;
    return std::string_view(start, static_cast<size_t>(at_ - start));
  }
  bool at_end() const { return at_ == end_; }

 private:
  const char* at_;
  const char* end_;
};

// The words of an enum, as to_string writes them, looked up without a string compare per
// candidate (a row has two of them).
template <typename Enum, size_t N>
class WordTable {
 public:
  explicit WordTable(const Enum (&values)[N]) {
    for (size_t i = 0; i < N; ++i) {
      words_[i] = to_string(values[i]);
      values_[i] = values[i];
    }
  }
  bool find(std::string_view word, Enum* out) const {
    for (size_t i = 0; i < N; ++i) {
      if (word.size() == words_[i].size() && word.front() == words_[i].front() &&
          word == words_[i]) {
        *out = values_[i];
        return true;
      }
    }
    return false;
  }

 private:
  std::string_view words_[N];
  Enum values_[N] = {};
};

bool parse_collective(std::string_view word, CollectiveType* out) {
  static constexpr CollectiveType kTypes[] = {
      CollectiveType::kAllReduce, CollectiveType::kAllGather, CollectiveType::kReduceScatter,
      CollectiveType::kBroadcast, CollectiveType::kReduce,    CollectiveType::kSendRecv,
      CollectiveType::kAllToAll,  CollectiveType::kOther,     CollectiveType::kNone};
  static const WordTable<CollectiveType, 9> kTable(kTypes);
  return !word.empty() && kTable.find(word, out);
}

bool parse_source(std::string_view word, CollectiveSource* out) {
  static constexpr CollectiveSource kSources[] = {
      CollectiveSource::kNcclPlugin, CollectiveSource::kKernelOrder, CollectiveSource::kKineto,
      CollectiveSource::kNone};
  static const WordTable<CollectiveSource, 4> kTable(kSources);
  return !word.empty() && kTable.find(word, out);
}

// One row line (no newline) into `r`; false if it is not one.  Fields in kColumns order
// (kColumnsBefore's when `with_kernel_ops` is false).
bool parse_row(std::string_view line, bool with_kernel_ops, CollectiveRecord* r) {
  *r = CollectiveRecord{};
  RowCursor c(line);
  return c.number(&r->step_index) && c.comma() && c.hex(&r->comm_hash) && c.comma() &&
         c.number(&r->seq) && c.comma() && parse_collective(c.word(), &r->type) && c.comma() &&
         c.optional_number<uint64_t>(0, &r->bytes) && c.comma() && c.name(&r->datatype) &&
         c.comma() && c.name(&r->algo) && c.comma() && c.name(&r->proto) && c.comma() &&
         c.optional_number<int32_t>(-1, &r->rank) && c.comma() &&
         c.optional_number<int32_t>(0, &r->nranks) && c.comma() && c.number(&r->device) &&
         c.comma() && c.number(&r->stream) && c.comma() && c.number(&r->host_enqueue) &&
         c.comma() && c.number(&r->gpu_start) && c.comma() && c.number(&r->gpu_end) && c.comma() &&
         parse_source(c.word(), &r->source) &&
         (!with_kernel_ops || (c.comma() && c.optional_number<uint16_t>(0, &r->kernel_ops))) &&
         c.at_end();
}

template <typename Int>
void json_int(const json& j, const char* key, Int* out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return;
  if constexpr (std::is_signed_v<Int>) {
    const auto v = it->get<int64_t>();
    if (v >= std::numeric_limits<Int>::min() && v <= std::numeric_limits<Int>::max())
      *out = static_cast<Int>(v);
  } else {
    if (it->is_number_unsigned() || it->get<int64_t>() >= 0) *out = it->get<Int>();
  }
}

std::string json_text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string quoted_start(std::string_view line) {
  std::string shown(utf8_prefix(line, 40));
  if (shown.size() < line.size()) shown += "...";
  return terminal_text(shown);
}

// Takes the file's lines one at a time (each without its newline); the same code reads a file
// in chunks and bytes in memory.
class RowsParser {
 public:
  RowsParser(const std::string& label, const std::function<void(const CollectiveRecord&)>& on_row)
      : label_(label), on_row_(on_row) {}

  // The first bytes of the input, before any line is whole: refuses a file that is not a rows
  // file without reading it all.
  Status check_start(std::string_view first_bytes) const {
    const size_t n = std::min(first_bytes.size(), kHeaderPrefix.size());
    if (first_bytes.substr(0, n) != kHeaderPrefix.substr(0, n)) return not_rows_file();
    return Status::Ok();
  }

  // `whole`: the line ended with a newline (false only for the input's last line).
  Status line(std::string_view text, bool whole) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    ++line_number_;
    if (line_number_ == 1) return header(text, whole);
    if (line_number_ == 2) return columns(text, whole);
    if (text.size() >= kTrailerPrefix.size() && text.substr(0, 2) == "# ") {
      if (!ended_ && text.substr(0, kTrailerPrefix.size()) == kTrailerPrefix && trailer(text))
        return Status::Ok();
      ++out_.bad_lines;
      return Status::Ok();
    }
    CollectiveRecord row;
    // A row without its newline was torn by a cut (the writer ends every row with one): its
    // last field may be a number cut short, which would parse.
    if (!ended_ && whole && parse_row(text, with_kernel_ops_, &row)) {
      ++out_.rows_read;
      on_row_(row);
    } else {
      ++out_.bad_lines;
    }
    return Status::Ok();
  }

  // A line longer than kMaxLineBytes, skipped.
  Status overlong_line() {
    ++line_number_;
    if (line_number_ <= 2) return not_rows_file();
    ++out_.bad_lines;
    return Status::Ok();
  }

  StatusOr<CollectiveRowsContents> finish() {
    if (line_number_ == 0) return Status::Error(label_ + ": empty file, not a collectives rows file");
    out_.cut_off = !ended_;
    return out_;
  }

 private:
  Status not_rows_file() const {
    return Status::Error(label_ + ": not a collectives rows file (it does not begin with '" +
                         std::string(kHeaderPrefix) + "1 {...}')");
  }

  Status header(std::string_view text, bool whole) {
    if (text.substr(0, kHeaderPrefix.size()) != kHeaderPrefix) return not_rows_file();
    const size_t space = text.find(' ', 2);
    const std::string_view schema = text.substr(2, space == std::string_view::npos
                                                         ? std::string_view::npos
                                                         : space - 2);
    if (schema != kCollectiveRowsSchema)
      return Status::Error(label_ + ": collectives rows file of schema '" + quoted_start(schema) +
                           "'; this gpuacct reads " + kCollectiveRowsSchema);
    if (!whole) return Status::Error(label_ + ": cut off inside its header line");
    const std::string_view object =
        space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    const json j = parse_json(object);
    if (!j.is_object())
      return Status::Error(label_ + ": the header of a collectives rows file is not a JSON object");
    RunMetadata& m = out_.header.metadata;
    m.source = json_text(j, "source");
    m.hostname = json_text(j, "hostname");
    m.job_id = json_text(j, "job_id");
    json_int(j, "pid", &m.pid);
    json_int(j, "rank", &m.rank);
    json_int(j, "world_size", &m.world_size);
    // A word this reader does not know (a newer writer) reads as none.
    parse_source(json_text(j, "identity"), &out_.header.identity);
    out_.header.identity_note = json_text(j, "identity_note");
    return Status::Ok();
  }

  Status columns(std::string_view text, bool whole) {
    // Cut inside the column line: a file with no rows, cut off (finish() says so).
    if (!whole && kColumns.substr(0, text.size()) == text) return Status::Ok();
    with_kernel_ops_ = text != kColumnsBefore;
    if (text != kColumns && text != kColumnsBefore)
      return Status::Error(label_ + ": its column line is not that of " +
                           kCollectiveRowsSchema + " ('" + quoted_start(text) + "')");
    return Status::Ok();
  }

  bool trailer(std::string_view text) {
    const std::string_view object = text.substr(kTrailerPrefix.size());
    const json j = parse_json(object);
    if (!j.is_object()) return false;
    json_int(j, "rows_lost", &out_.rows_lost);
    ended_ = true;
    return true;
  }

  bool with_kernel_ops_ = true;
  const std::string& label_;
  const std::function<void(const CollectiveRecord&)>& on_row_;
  CollectiveRowsContents out_;
  int64_t line_number_ = 0;
  bool ended_ = false;  // the trailer was read; lines after it are bad
};

// Feeds `bytes` to `parser` line by line; `last` says no bytes follow.  Returns how many bytes
// were consumed (whole lines; everything when `last`).
StatusOr<size_t> feed_lines(RowsParser& parser, std::string_view bytes, bool last) {
  size_t start = 0;
  while (start < bytes.size()) {
    const void* hit = std::memchr(bytes.data() + start, '\n', bytes.size() - start);
    if (hit == nullptr) {
      if (!last) break;
      GPUACCT_RETURN_IF_ERROR(parser.line(bytes.substr(start), /*whole=*/false));
      return bytes.size();
    }
    const size_t end = static_cast<size_t>(static_cast<const char*>(hit) - bytes.data());
    GPUACCT_RETURN_IF_ERROR(parser.line(bytes.substr(start, end - start), /*whole=*/true));
    start = end + 1;
  }
  return start;
}

}  // namespace

std::string collective_row_csv(const CollectiveRecord& row) {
  std::string out;
  append_row(out, row);
  return out;
}

std::string_view collective_rows_columns() {
  return kColumns;
}

Status CollectiveRowWriter::open(const std::string& path, const CollectiveRowsHeader& header,
                                 OutputPolicy policy) {
  GPUACCT_RETURN_IF_ERROR(file_.open(path, policy));
  const RunMetadata& m = header.metadata;
  json j = {{"rank", m.rank},
            {"world_size", m.world_size},
            {"hostname", json_safe_utf8(m.hostname)},
            {"pid", m.pid},
            {"job_id", json_safe_utf8(m.job_id)},
            {"source", json_safe_utf8(m.source)},
            {"identity", to_string(header.identity)}};
  if (!header.identity_note.empty()) j["identity_note"] = json_safe_utf8(header.identity_note);
  j["gpuacct_version"] = GPUACCT_VERSION_STRING;
  line_.clear();
  line_.append("# ").append(kCollectiveRowsSchema).append(" ").append(dump_json(j));
  line_.append("\n").append(kColumns).append("\n");
  const Status st = file_.write(line_);
  if (!st.ok()) {
    failed_ = true;
    file_.abandon();
  }
  return st;
}

void CollectiveRowWriter::append(const CollectiveRecord& row) {
  if (failed_ || !file_.is_open()) {
    ++rows_lost_;
    return;
  }
  line_.clear();
  append_row(line_, row);
  line_.push_back('\n');
  if (file_.write(line_).ok()) {
    ++rows_;
  } else {
    failed_ = true;
    ++rows_lost_;
  }
}

Status CollectiveRowWriter::flush() {
  if (!file_.is_open()) return Status::Error(path() + ": the collectives rows file is not open");
  const Status st = file_.flush();
  if (!st.ok()) failed_ = true;
  return st;
}

Status CollectiveRowWriter::finish() {
  if (!file_.is_open()) return Status::Error(path() + ": the collectives rows file is not open");
  line_.assign("# end {\"rows\":");
  append_int(line_, rows_);
  line_.append(",\"rows_lost\":");
  append_int(line_, rows_lost_);
  line_.append("}\n");
  const Status st = file_.write(line_);
  if (!st.ok()) {
    file_.abandon();
    return st;
  }
  return file_.commit();
}

StatusOr<CollectiveRowsContents> read_collective_rows_buffer(
    std::string_view bytes, const std::string& label,
    const std::function<void(const CollectiveRecord&)>& on_row) {
  RowsParser parser(label, on_row);
  GPUACCT_RETURN_IF_ERROR(parser.check_start(bytes));
  auto fed = feed_lines(parser, bytes, /*last=*/true);
  if (!fed.ok()) return fed.status();
  return parser.finish();
}

StatusOr<CollectiveRowsContents> read_collective_rows(
    const std::string& path, const std::function<void(const CollectiveRecord&)>& on_row) {
  GPUACCT_RETURN_IF_ERROR(check_input_file(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  RowsParser parser(path, on_row);
  constexpr size_t kChunk = size_t{1} << 20;
  std::string buffer(kChunk + kMaxLineBytes, '\0');
  size_t held = 0;           // bytes of an unfinished line at the buffer's start
  bool skipping = false;     // inside an overlong line: dropped up to its newline
  bool started = false;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data() + held, buffer.size() - held);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(path + ": read failed: " + std::strerror(errno));
    const bool last = n == 0;
    size_t filled = held + static_cast<size_t>(n);
    std::string_view bytes(buffer.data(), filled);
    if (!started && (filled >= kHeaderPrefix.size() || last)) {
      GPUACCT_RETURN_IF_ERROR(parser.check_start(bytes));
      started = true;
    }
    if (skipping) {
      const size_t newline = bytes.find('\n');
      if (newline == std::string_view::npos) {
        held = 0;
        if (last) break;
        continue;
      }
      skipping = false;
      bytes.remove_prefix(newline + 1);
    }
    auto fed = feed_lines(parser, bytes, last);
    if (!fed.ok()) return fed.status();
    if (last) break;
    held = bytes.size() - *fed;
    if (held > kMaxLineBytes) {
      GPUACCT_RETURN_IF_ERROR(parser.overlong_line());
      skipping = true;
      held = 0;
    } else {
      std::memmove(buffer.data(), bytes.data() + *fed, held);
    }
  }
  return parser.finish();
}

}  // namespace gpuacct
