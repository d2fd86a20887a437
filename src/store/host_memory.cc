#include "store/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/byte_size.h"
#include "core/file.h"
#include "core/status.h"
#include "store/range_reader.h"

namespace st {

HostMemory parse_meminfo(const char* text) {
  HostMemory m;
  auto field = [text](const char* key) -> uint64_t {
    const char* p = std::strstr(text, key);
    if (p == nullptr) return 0;
    p += std::strlen(key);
    char* end = nullptr;
    const unsigned long long kib = std::strtoull(p, &end, 10);
    if (end == p) return 0;
    return static_cast<uint64_t>(kib) * 1024;  // meminfo counts kB (KiB)
  };
  m.total = field("MemTotal:");
  m.available = field("MemAvailable:");
  return m;
}

namespace {

// A small text file's contents ("" when it cannot be read: no such file, no permission).
std::string slurp(const char* path) {
  StatusOr<std::string> s = read_file_to_string(path);
  return s.ok() ? *s : std::string();
}

// The value after `key ` at the start of a line of memory.stat; 0 when absent.
uint64_t stat_field(const std::string& stat, const char* key) {
  const std::string k = std::string(key) + " ";
  for (size_t pos = 0; pos < stat.size();) {
    if (stat.compare(pos, k.size(), k) == 0) return std::strtoull(stat.c_str() + pos + k.size(), nullptr, 10);
    const size_t nl = stat.find('\n', pos);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return 0;
}

}  // namespace

HostMemory apply_cgroup_limit(HostMemory m, const std::string& limit, const std::string& usage, const std::string& stat) {
  if (limit.empty() || limit.compare(0, 3, "max") == 0 || usage.empty()) return m;
  const uint64_t lim = std::strtoull(limit.c_str(), nullptr, 10);
  if (lim == 0 || lim >= (1ull << 60)) return m;  // v1 writes ~2^63 for "no limit"
  uint64_t used = std::strtoull(usage.c_str(), nullptr, 10);
  const uint64_t inactive = std::max(stat_field(stat, "inactive_file"), stat_field(stat, "total_inactive_file"));
  used -= std::min(used, inactive);
  const uint64_t avail = lim > used ? lim - used : 0;
  if (m.total == 0 || lim < m.total) m.total = lim;
  if (m.available == 0 || avail < m.available) m.available = avail;
  return m;
}

HostMemory host_memory() {
  HostMemory m = parse_meminfo(slurp("/proc/meminfo").c_str());
  if (m.available == 0) return m;
  const std::string v2 = slurp("/sys/fs/cgroup/memory.max");
  if (!v2.empty())
    return apply_cgroup_limit(m, v2, slurp("/sys/fs/cgroup/memory.current"), slurp("/sys/fs/cgroup/memory.stat"));
  return apply_cgroup_limit(m, slurp("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                            slurp("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
                            slurp("/sys/fs/cgroup/memory/memory.stat"));
}

uint64_t default_ram_budget(const HostMemory& m) {
  if (m.available == 0) return UINT64_MAX;
  const uint64_t margin = std::max<uint64_t>(2ull << 30, m.total / 10);
  return m.available > margin ? m.available - margin : 0;
}

std::string describe_ram_layers(const StoreManifest& m, const std::string& dir, const std::vector<bool>& in_ram,
                                const std::vector<bool>& resident, uint64_t budget, const std::string& why) {
  int kept = 0, streamed_on_disk = 0;
  for (int l = 0; l < m.num_layers; ++l) {
    const bool ram = in_ram[static_cast<size_t>(l)], res = !resident.empty() && resident[static_cast<size_t>(l)];
    kept += ram;
    streamed_on_disk += !ram && !res;
  }
  const uint64_t need = ram_extras_bytes(m) + ram_layer_stride(m) * static_cast<uint64_t>(m.num_layers);
  Str s;
  s << "host RAM: the layer store needs " << format_bytes(need) << ", the RAM budget is " << format_bytes(budget) << " ("
    << why << "); keeping " << kept << " of " << m.num_layers << " layers in RAM, the other " << m.num_layers - kept
    << " read from the store files (" << dir << ")";
  if (streamed_on_disk > 0) s << ": " << streamed_on_disk << " of them stream at the disk's speed at every use";
  else s << ", once each (resident on the device)";
  return s.str();
}

uint64_t ram_layer_stride(const StoreManifest& m) { return round_up_io(m.layer_bytes); }
uint64_t ram_extras_bytes(const StoreManifest& m) { return round_up_io(m.extras_bytes); }

std::vector<bool> choose_ram_layers(const StoreManifest& m, uint64_t budget, const std::vector<int>& resident) {
  const int L = m.num_layers;
  const uint64_t stride = ram_layer_stride(m), extras = ram_extras_bytes(m);
  if (budget >= extras && (budget - extras) / stride >= static_cast<uint64_t>(L)) return {};
  std::vector<bool> in_ram(static_cast<size_t>(L), false);
  if (budget < extras) return in_ram;  // not even the extras: every layer from disk
  uint64_t room = (budget - extras) / stride;
  std::vector<bool> is_resident(static_cast<size_t>(L), false);
  for (int l : resident)
    if (l >= 0 && l < L) is_resident[static_cast<size_t>(l)] = true;
  std::vector<int> streamed, kept;
  for (int l = 0; l < L; ++l) (is_resident[static_cast<size_t>(l)] ? kept : streamed).push_back(l);
  // Streamed layers first; the ones left on disk spread over the depth.
  const size_t S = streamed.size();
  const size_t on_disk = S > room ? S - static_cast<size_t>(room) : 0;
  std::vector<bool> disk(S, false);
  for (size_t i = 0; i < on_disk; ++i) disk[(2 * i + 1) * S / (2 * on_disk)] = true;
  for (size_t i = 0; i < S; ++i)
    if (!disk[i]) in_ram[static_cast<size_t>(streamed[i])] = true;
  room -= std::min<uint64_t>(room, S - on_disk);
  for (size_t i = 0; i < kept.size() && room > 0; ++i, --room) in_ram[static_cast<size_t>(kept[i])] = true;
  return in_ram;
}

}  // namespace st
