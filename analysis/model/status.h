// Status / StatusOr: error values instead of exceptions.  Everything in analysis/ reports
// failure through these so that callers on a C boundary (the injected library) never see an
// exception, and so that tools can print one clear line and exit non-zero.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace gpuacct {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit on purpose
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit on purpose

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

#define GPUACCT_RETURN_IF_ERROR(expr) \
  do {                                \
    ::gpuacct::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)

}  // namespace gpuacct
