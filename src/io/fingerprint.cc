#include "io/fingerprint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "core/file.h"

namespace st {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

void fnv_bytes(uint64_t* h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    *h ^= p[i];
    *h *= kFnvPrime;
  }
}

// Fixed-width little-endian so the digest does not depend on the host's integer layout.
void fnv_u64(uint64_t* h, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  fnv_bytes(h, b, 8);
}

}  // namespace

StatusOr<std::string> source_fingerprint(const std::vector<std::string>& files) {
  uint64_t h = kFnvOffset;
  fnv_u64(&h, files.size());
  for (const std::string& f : files) {
    struct stat sb;
    if (::stat(f.c_str(), &sb) != 0) {
      if (errno == ENOENT) return NotFound(Str() << f << ": no such file (computing source fingerprint)");
      return ErrnoError("stat " + f);
    }
    const std::string base = path_basename(f);
    fnv_u64(&h, base.size());  // length prefix: "ab"+"c" must differ from "a"+"bc"
    fnv_bytes(&h, base.data(), base.size());
    fnv_u64(&h, static_cast<uint64_t>(sb.st_size));
    const uint64_t mtime_ns =
        static_cast<uint64_t>(sb.st_mtim.tv_sec) * 1000000000ull + static_cast<uint64_t>(sb.st_mtim.tv_nsec);
    fnv_u64(&h, mtime_ns);
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return std::string(buf);
}

}  // namespace st
