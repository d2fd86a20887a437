// Status and StatusOr: the error currency of every function that touches the outside world
// (files, configs, user input, allocations that can fail). Modelled on absl::Status.
// A Status is cheap to pass when ok (one null pointer). Context is prepended as an error
// travels up: "loading model dir/x: reading a.safetensors: tensor 'w': shape mismatch".
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace st {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad user input: config key, CLI flag, value out of range
  kNotFound,           // a file, tensor or key that should be there is not
  kCorruption,         // bytes on disk that do not parse or contradict themselves
  kIOError,            // the OS refused: open/read/write/rename failed
  kResourceExhausted,  // memory, VRAM budget
  kUnimplemented,      // a feature we deliberately do not support (named)
  kInternal,           // a bug of ours detected at run time
  kCancelled,          // interrupted by the user (SIGINT)
};

const char* status_code_name(StatusCode c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg);
  static Status OK() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "Corruption: msg" or "OK".
  std::string to_string() const;
  // Returns a copy with "ctx: " prepended to the message (no-op when ok).
  Status with_context(const std::string& ctx) const;
  void ignore_error() const {}

 private:
  struct Rep {
    StatusCode code;
    std::string msg;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Corruption(std::string m) { return Status(StatusCode::kCorruption, std::move(m)); }
inline Status IOError(std::string m) { return Status(StatusCode::kIOError, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }

// IOError carrying strerror(errno) for `what` (e.g. "opening /x/y").
Status ErrnoError(const std::string& what);

// Builds messages with <<: return Corruption(Str() << "tensor '" << name << "' ...");
class Str {
 public:
  template <typename T>
  Str& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  operator std::string() const { return os_.str(); }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& s) : status_(s) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr constructed from OK status without a value");
  }
  StatusOr(T v) : value_(std::move(v)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { check_ok(); return *value_; }
  const T& value() const& { check_ok(); return *value_; }
  T&& value() && { check_ok(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check_ok() const {
    if (!status_.ok()) {
      std::fprintf(stderr, "FATAL: StatusOr::value() on error: %s\n", status_.to_string().c_str());
      std::abort();
    }
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace st

#define ST_CONCAT_INNER(a, b) a##b
#define ST_CONCAT(a, b) ST_CONCAT_INNER(a, b)

// RETURN_IF_ERROR(expr) or RETURN_IF_ERROR(expr, "context " << x)
#define RETURN_IF_ERROR(...) ST_RIE_PICK(__VA_ARGS__, ST_RIE2, ST_RIE1)(__VA_ARGS__)
#define ST_RIE_PICK(_1, _2, NAME, ...) NAME
#define ST_RIE1(expr)                        \
  do {                                       \
    ::st::Status st_rie_s_ = (expr);         \
    if (!st_rie_s_.ok()) return st_rie_s_;   \
  } while (0)
#define ST_RIE2(expr, ctx)                                                       \
  do {                                                                           \
    ::st::Status st_rie_s_ = (expr);                                             \
    if (!st_rie_s_.ok()) return st_rie_s_.with_context((::st::Str() << ctx).str()); \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr) or ASSIGN_OR_RETURN(lhs, expr, "context " << x)
#define ASSIGN_OR_RETURN(...) ST_AOR_PICK(__VA_ARGS__, ST_AOR3, ST_AOR2)(__VA_ARGS__)
#define ST_AOR_PICK(_1, _2, _3, NAME, ...) NAME
#define ST_AOR2(lhs, expr) ST_AOR_IMPL(ST_CONCAT(st_aor_, __LINE__), lhs, expr, "")
#define ST_AOR3(lhs, expr, ctx) ST_AOR_IMPL(ST_CONCAT(st_aor_, __LINE__), lhs, expr, ctx)
#define ST_AOR_IMPL(tmp, lhs, expr, ctx)                                              \
  auto tmp = (expr);                                                                  \
  if (!tmp.ok()) {                                                                    \
    std::string st_ctx_ = (::st::Str() << ctx).str();                                 \
    return st_ctx_.empty() ? tmp.status() : tmp.status().with_context(st_ctx_);       \
  }                                                                                   \
  lhs = std::move(tmp).value()
