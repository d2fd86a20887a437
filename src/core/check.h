// CHECK: programmer invariants, always on; abort with file:line and a message.
// DCHECK: the same, debug builds only (hot loops). Bad *user input* is never a CHECK: it is a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "core/status.h"

namespace st::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& msg);
}

#define CHECK(cond, ...)                                                              \
  do {                                                                                \
    if (!(cond)) ::st::detail::check_failed(__FILE__, __LINE__, #cond, (::st::Str() __VA_OPT__(<< __VA_ARGS__)).str()); \
  } while (0)

#define CHECK_OK(expr)                                                                \
  do {                                                                                \
    ::st::Status st_chk_ = (expr);                                                    \
    if (!st_chk_.ok()) ::st::detail::check_failed(__FILE__, __LINE__, #expr, st_chk_.to_string()); \
  } while (0)

#ifdef NDEBUG
#define DCHECK(cond, ...) do { (void)sizeof(cond); } while (0)
#else
#define DCHECK(cond, ...) CHECK(cond __VA_OPT__(, __VA_ARGS__))
#endif
