#include "backend/cuda/profiler_impl.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace st::cuda {
namespace {

// Resolving costs one host synchronisation: do it rarely (and at report/reset).
constexpr size_t kFlushEvery = 8192;

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "streamtune profiler: %s: %s\n", what, cudaGetErrorString(e));
  std::abort();
}

struct Stat {
  double gpu_ms = 0, host_ms = 0;
  int64_t calls = 0;
};

}  // namespace

struct Profiler::Pending {
  std::string key;
  int a, b;
  double host_ms;
};

struct Profiler::State {
  std::vector<cudaEvent_t> events;  // pool
  std::vector<int> free_list;
  std::vector<Pending> pending;
  std::map<std::string, Stat> stats;
  int take() {
    if (free_list.empty()) {
      cudaEvent_t e;
      check(cudaEventCreate(&e), "cudaEventCreate");
      events.push_back(e);
      return static_cast<int>(events.size()) - 1;
    }
    const int i = free_list.back();
    free_list.pop_back();
    return i;
  }
};

Profiler& Profiler::get() {
  static Profiler p;
  return p;
}

Profiler::Profiler() : st_(new State) {
  const char* e = std::getenv("STREAMTUNE_PROFILE");
  enabled_ = e && std::strcmp(e, "1") == 0;
}

int Profiler::begin(cudaStream_t s) {
  const int i = st_->take();
  check(cudaEventRecord(st_->events[i], s), "cudaEventRecord");
  return i;
}

void Profiler::end(int start, cudaStream_t s, std::string key, double host_ms) {
  const int i = st_->take();
  check(cudaEventRecord(st_->events[i], s), "cudaEventRecord");
  st_->pending.push_back({std::move(key), start, i, host_ms});
  if (st_->pending.size() >= kFlushEvery) flush();
}

void Profiler::flush() {
  if (st_->pending.empty()) return;
  check(cudaEventSynchronize(st_->events[st_->pending.back().b]), "cudaEventSynchronize");
  for (Pending& p : st_->pending) {
    float ms = 0;
    check(cudaEventSynchronize(st_->events[p.b]), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, st_->events[p.a], st_->events[p.b]), "cudaEventElapsedTime");
    Stat& s = st_->stats[p.key];
    s.gpu_ms += ms;
    s.host_ms += p.host_ms;
    ++s.calls;
    st_->free_list.push_back(p.a);
    st_->free_list.push_back(p.b);
  }
  st_->pending.clear();
}

void Profiler::reset() {
  flush();
  st_->stats.clear();
}

std::string Profiler::report(double steps, double step_wall_ms) {
  flush();
  steps = std::max(steps, 1.0);
  std::map<std::string, Stat> kinds;
  Stat total;
  for (const auto& [k, s] : st_->stats) {
    Stat& d = kinds[k.substr(0, k.find(' '))];
    d.gpu_ms += s.gpu_ms;
    d.host_ms += s.host_ms;
    d.calls += s.calls;
    total.gpu_ms += s.gpu_ms;
    total.host_ms += s.host_ms;
    total.calls += s.calls;
  }
  auto sorted = [](const std::map<std::string, Stat>& m) {
    std::vector<std::pair<std::string, Stat>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.gpu_ms > b.second.gpu_ms; });
    return v;
  };
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "== op profile (per step, %.0f steps): device op time %.2f ms, host time in op calls %.2f ms, "
                "%.0f ops; step wall %.2f ms\n",
                steps, total.gpu_ms / steps, total.host_ms / steps, total.calls / steps, step_wall_ms);
  out += line;
  out += "   kind                      dev ms/step   %dev  calls/step  us/call  host ms/step\n";
  for (const auto& [k, s] : sorted(kinds)) {
    std::snprintf(line, sizeof line, "   %-24s %12.3f %6.1f %11.1f %8.1f %13.3f\n", k.c_str(), s.gpu_ms / steps,
                  100.0 * s.gpu_ms / std::max(total.gpu_ms, 1e-9), s.calls / steps, 1e3 * s.gpu_ms / s.calls,
                  s.host_ms / steps);
    out += line;
  }
  out += "   top shapes                                            dev ms/step  calls/step  us/call\n";
  int n = 0;
  for (const auto& [k, s] : sorted(st_->stats)) {
    if (++n > 40) break;
    std::snprintf(line, sizeof line, "   %-54s %10.3f %11.1f %8.1f\n", k.c_str(), s.gpu_ms / steps, s.calls / steps,
                  1e3 * s.gpu_ms / s.calls);
    out += line;
  }
  return out;
}

bool profile_enabled() { return Profiler::get().enabled(); }
void profile_reset() {
  if (Profiler::get().enabled()) Profiler::get().reset();
}
std::string profile_report(double steps, double step_wall_ms) {
  return Profiler::get().enabled() ? Profiler::get().report(steps, step_wall_ms) : std::string();
}

}  // namespace st::cuda
