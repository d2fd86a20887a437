// metrics.jsonl: one JSON object per logged step, e.g.
//   {"step":3,"loss":5.61520982,"lr":0.001,"grad_norm":0.971079111,"tokens":78,"tok_s":812.5,"elapsed_s":0.31}
// and one per evaluation:
//   {"step":10,"eval_loss":5.2,"eval_ppl":181.27}
// loss/lr/grad_norm/eval_* with %.9g (float32 round-trips). tokens: cumulative tokens (B*T,
// padding included) trained so far; tok_s: tokens of the logged steps / their wall time.
// A resumed run keeps the lines up to its checkpoint step (truncate_metrics) and appends.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace st {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;  // cumulative
  double tok_s = 0, elapsed_s = 0;
  // More figures of the step, written after the others in this order (DPO's rewards/chosen, ...).
  std::vector<std::pair<std::string, double>> extra = {};
};

struct EvalMetrics {
  int64_t step = 0;
  double loss = 0;
  // More figures (DPO's eval_rewards/chosen, ...). With any, eval_loss is not a token cross-entropy:
  // no eval_ppl is written.
  std::vector<std::pair<std::string, double>> extra = {};
  double runtime_s = -1;  // seconds the evaluation took (HF's eval_runtime); < 0: not written
  double ppl() const;  // exp(loss), +inf when it overflows
};

// StepMetrics::extra averaged over the steps between two logs, as HF averages its stored metrics:
// a name a step lacks (KTO's rewards/rejected in a step of desirable examples only) is the mean
// over the steps that have it.
class ExtraMeans {
 public:
  void add(const std::vector<std::pair<std::string, double>>& values);
  // The means in first-seen order; then empty again.
  std::vector<std::pair<std::string, double>> take();

 private:
  struct Acc {
    std::string name;
    double sum = 0;
    int64_t n = 0;
  };
  std::vector<Acc> acc_;
};

std::string metrics_json_line(const StepMetrics& m);
std::string metrics_json_line(const EvalMetrics& m);

class MetricsWriter {
 public:
  // Truncates (or, when `append`, extends) path. Each line is flushed as written.
  static StatusOr<std::unique_ptr<MetricsWriter>> open(const std::string& path, bool append);
  ~MetricsWriter();
  Status write(const StepMetrics& m);
  Status write(const EvalMetrics& m);

 private:
  Status write_line(const std::string& line);
  std::FILE* f_ = nullptr;
  std::string path_;
};

// Rewrites `path` (atomically) keeping only the complete lines whose "step" is <= max_step, so
// that a resumed run appends after its checkpoint. A missing file is not an error.
Status truncate_metrics(const std::string& path, int64_t max_step);

}  // namespace st
