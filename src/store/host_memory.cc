#include "store/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

HostMemory host_memory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return {};
  char buf[8192];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return parse_meminfo(buf);
}

uint64_t default_ram_budget(const HostMemory& m) {
  if (m.available == 0) return UINT64_MAX;
  const uint64_t margin = std::max<uint64_t>(2ull << 30, m.total / 10);
  return m.available > margin ? m.available - margin : 0;
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
