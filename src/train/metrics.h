// metrics.jsonl: one JSON object per logged step, e.g.
//   {"step":3,"loss":5.61520982,"lr":0.001,"grad_norm":0.971079111,"tokens":78,"tok_s":812.5,"elapsed_s":0.31}
// loss/lr/grad_norm with %.9g (float32 round-trips). tokens: cumulative tokens (B*T, padding
// included) trained so far; tok_s: tokens of the logged steps / their wall time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/status.h"

namespace st {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;  // cumulative
  double tok_s = 0, elapsed_s = 0;
};

std::string metrics_json_line(const StepMetrics& m);

class MetricsWriter {
 public:
  // Truncates (or, when `append`, extends) path. Each line is flushed as written.
  static StatusOr<std::unique_ptr<MetricsWriter>> open(const std::string& path, bool append);
  ~MetricsWriter();
  Status write(const StepMetrics& m);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace st
