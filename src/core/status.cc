#include "core/status.h"

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace st {

const char* status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string msg) {
  if (code != StatusCode::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(msg)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->msg : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(rep_->code)) + ": " + rep_->msg;
}

Status Status::with_context(const std::string& ctx) const {
  if (ok() || ctx.empty()) return *this;
  return Status(rep_->code, ctx + ": " + rep_->msg);
}

Status ErrnoError(const std::string& what) {
  int e = errno;
  return IOError(what + ": " + std::strerror(e));
}

namespace detail {
void check_failed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "CHECK failed at %s:%d: %s%s%s\n", file, line, expr, msg.empty() ? "" : " -- ",
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace st
