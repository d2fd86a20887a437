#include "core/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace st {

StatusOr<uint64_t> parse_byte_size(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string num = s.substr(0, i), unit;
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(s[j])));
  char* end = nullptr;
  double v = num.empty() ? -1 : std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || v < 0)
    return InvalidArgument("'" + s + "' is not a byte size (examples: 4GiB, 512MiB, 1.5GB, 1073741824)");
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
      {"k", 1024.0}, {"m", 1048576.0}, {"g", 1073741824.0}, {"t", 1099511627776.0},
      {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const auto& [name, mult] : kUnits)
    if (unit == name) {
      double b = std::floor(v * mult);
      if (b > 1.8e19) return InvalidArgument("byte size '" + s + "' is too large");
      return static_cast<uint64_t>(b);
    }
  return InvalidArgument("'" + s + "': unknown unit '" + unit + "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

std::string format_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof(buf), "%.2f GiB", b / 1073741824.0);
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof(buf), "%.1f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace st
