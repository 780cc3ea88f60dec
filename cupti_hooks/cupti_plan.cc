#include "cupti_hooks/cupti_plan.h"

#include <array>
#include <utility>

namespace gpuacct::cupti {
namespace {

constexpr std::array<std::pair<std::string_view, uint32_t>, 5> kKindNames = {{
    {"kernel", kKindKernel},
    {"copy", kKindCopy},
    {"memset", kKindMemset},
    {"sync", kKindSync},
    {"graph", kKindGraph},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

CallbackSet callback_set(const CuptiPlan& plan, bool stacks, bool identify_threads) {
  constexpr uint8_t kBoth = kRuntimeDomain | kDriverDomain;
  if (identify_threads || api_from_callbacks(plan)) return {kBoth, kBoth, kBoth};
  switch (plan.callbacks) {
    case CallbackDomains::kDesign:
      // Every runtime launch reaches the driver domain's launch callbacks (tests/gpu/check.sh
      // 2a on an H200: nested = runtime on all six programs), and launches that bypass the
      // runtime (NCCL, Triton, cuBLAS's cuLaunchKernel) are seen only there: one callback
      // pair per launch.  Syncs are few per step: both domains, so a blocking sync's call site
      // does not depend on how the runtime implements it.
      return stacks ? CallbackSet{kDriverDomain, kBoth, 0} : CallbackSet{};
    case CallbackDomains::kNone:
      return {};
    case CallbackDomains::kRuntime:
      return {kRuntimeDomain, kRuntimeDomain, 0};
    case CallbackDomains::kDriver:
      return {kDriverDomain, kDriverDomain, 0};
    case CallbackDomains::kBoth:
      return {kBoth, kBoth, 0};
  }
  return {};
}

bool parse_kinds(std::string_view text, uint32_t* kinds) {
  text = trim(text);
  if (text == "none") {
    *kinds = 0;
    return true;
  }
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    bool known = false;
    for (const auto& [name, bit] : kKindNames) {
      if (item == name) {
        mask |= bit;
        known = true;
      }
    }
    if (!known) return false;
  }
  if (mask == 0) return false;
  *kinds = mask;
  return true;
}

std::string kinds_to_string(uint32_t kinds) {
  std::string out;
  for (const auto& [name, bit] : kKindNames) {
    if ((kinds & bit) == 0) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  return out.empty() ? "none" : out;
}

bool parse_callback_domains(std::string_view text, CallbackDomains* out) {
  text = trim(text);
  for (CallbackDomains d :
       {CallbackDomains::kDesign, CallbackDomains::kNone, CallbackDomains::kRuntime,
        CallbackDomains::kDriver, CallbackDomains::kBoth}) {
    if (text == to_string(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

const char* to_string(CallbackDomains d) {
  switch (d) {
    case CallbackDomains::kDesign:
      return "design";
    case CallbackDomains::kNone:
      return "none";
    case CallbackDomains::kRuntime:
      return "runtime";
    case CallbackDomains::kDriver:
      return "driver";
    case CallbackDomains::kBoth:
      return "both";
  }
  return "design";
}

bool parse_timestamp_source(std::string_view text, TimestampSource* out) {
  text = trim(text);
  for (TimestampSource t :
       {TimestampSource::kAuto, TimestampSource::kCallback, TimestampSource::kCupti}) {
    if (text == to_string(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* to_string(TimestampSource t) {
  switch (t) {
    case TimestampSource::kAuto:
      return "auto";
    case TimestampSource::kCallback:
      return "callback";
    case TimestampSource::kCupti:
      return "cupti";
  }
  return "auto";
}

bool parse_sample_switch(std::string_view text, SampleSwitch* out) {
  text = trim(text);
  for (SampleSwitch s : {SampleSwitch::kAll, SampleSwitch::kActivity}) {
    if (text == to_string(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

const char* to_string(SampleSwitch s) {
  switch (s) {
    case SampleSwitch::kAll:
      return "all";
    case SampleSwitch::kActivity:
      return "activity";
  }
  return "all";
}

bool parse_api_source(std::string_view text, ApiSource* out) {
  text = trim(text);
  for (ApiSource s : {ApiSource::kRecords, ApiSource::kCallbacks}) {
    if (text == to_string(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

const char* to_string(ApiSource s) {
  switch (s) {
    case ApiSource::kRecords:
      return "records";
    case ApiSource::kCallbacks:
      return "callbacks";
  }
  return "records";
}

}  // namespace gpuacct::cupti
