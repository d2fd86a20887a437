// How much of a layer store the RAM tier may keep in host memory, and which layers.
//
// Note [partial RAM store]
// The RAM tier holds the base in one pinned arena: a model larger than the machine's free RAM
// would be OOM-killed halfway through "loading the layer store into RAM" (Linux overcommits the
// allocation; the kill comes while filling it). Instead the arena takes what fits in a RAM budget
// -- the extras blob first (the host-extras lm_head streams from it every step), then the streamed
// layers spread over the depth, then the resident ones -- and the RamStore reads every other layer
// from its store file at each use, through the disk tier's pinned staging ring (store/disk_store.h).
// Resident layers go to disk first: the device keeps them after one load, so their file is read
// once per run; a streamed layer left on disk is read at every visit, at the disk's speed. Spreading
// the disk layers over the depth puts each slow read beside RAM-fast neighbours. The bytes a layer
// yields are the file's either way (checksummed on first read): the bits do not change.
// The budget: `ram_budget` when given, else MemAvailable (/proc/meminfo; a container's cgroup limit
// when lower) less a margin of max(2 GiB, MemTotal / 10) for everything else the process and the
// machine need; unknown (no /proc/meminfo) = no limit, as before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/manifest.h"

namespace st {

struct HostMemory {
  uint64_t total = 0, available = 0;  // bytes; 0 = unknown
};
// /proc/meminfo (MemTotal, MemAvailable), lowered to the process's memory cgroup when that has a
// limit (a container's: cgroup v2 memory.max - (memory.current - inactive_file), or v1's
// limit_in_bytes and usage_in_bytes) -- the kernel's OOM killer enforces the smaller one. Zeros
// where nothing can be read.
HostMemory host_memory();
// Parses meminfo text (for tests).
HostMemory parse_meminfo(const char* text);
// Lowers m to a cgroup limit: `limit` and `usage` as the cgroup files give them ("max" or bytes;
// empty: no such file), `stat` its memory.stat text (inactive file pages count as free).
HostMemory apply_cgroup_limit(HostMemory m, const std::string& limit, const std::string& usage, const std::string& stat);

// The default RAM budget for a store arena: available less max(2 GiB, total / 10); UINT64_MAX
// when unknown.
uint64_t default_ram_budget(const HostMemory& m);

// Note [partial RAM store]: per layer, whether the arena keeps it within `budget` bytes (extras
// included; every layer when everything fits). `resident`: the layers the device keeps (disk
// first). An empty vector means every layer fits.
std::vector<bool> choose_ram_layers(const StoreManifest& m, uint64_t budget, const std::vector<int>& resident);

// The start-up line for a partial choice (in_ram not empty): what the store needs, the budget and
// `why` it is that, how many layers stay in RAM, and how many of the others stream from disk at
// every use (`resident`, per layer: kept on the device, so read once; empty: none is).
std::string describe_ram_layers(const StoreManifest& m, const std::string& dir, const std::vector<bool>& in_ram,
                                const std::vector<bool>& resident, uint64_t budget, const std::string& why);

// Arena bytes of one layer / of the extras (O_DIRECT-aligned slices).
uint64_t ram_layer_stride(const StoreManifest& m);
uint64_t ram_extras_bytes(const StoreManifest& m);

}  // namespace st
