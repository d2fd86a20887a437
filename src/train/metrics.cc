#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "core/file.h"
#include "core/json.h"

namespace st {

void ExtraMeans::add(const std::vector<std::pair<std::string, double>>& values) {
  for (const auto& [name, v] : values) {
    auto it = std::find_if(acc_.begin(), acc_.end(), [&](const Acc& a) { return a.name == name; });
    if (it == acc_.end()) it = acc_.insert(acc_.end(), Acc{name});
    it->sum += v;
    ++it->n;
  }
}

std::vector<std::pair<std::string, double>> ExtraMeans::take() {
  std::vector<std::pair<std::string, double>> out;
  for (const Acc& a : acc_) out.emplace_back(a.name, a.sum / static_cast<double>(std::max<int64_t>(a.n, 1)));
  acc_.clear();
  return out;
}

double EvalMetrics::ppl() const { return std::exp(loss); }

namespace {
// `line` (one JSON object) with `extra` appended as number members; a non-finite one as null.
std::string with_extra(const std::string& line, const std::vector<std::pair<std::string, double>>& extra) {
  if (extra.empty()) return line;
  std::string out = line.substr(0, line.size() - 1);
  for (const auto& [k, v] : extra) {
    char num[64];
    if (std::isfinite(v)) std::snprintf(num, sizeof num, "%.9g", v);
    else std::snprintf(num, sizeof num, "null");
    out += ",\"" + k + "\":" + num;
  }
  return out + "}";
}
}  // namespace

std::string metrics_json_line(const StepMetrics& m) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"tokens\":%lld,\"tok_s\":%.6g,"
                "\"elapsed_s\":%.6g}",
                static_cast<long long>(m.step), m.loss, m.lr, m.grad_norm, static_cast<long long>(m.tokens),
                m.tok_s, m.elapsed_s);
  return with_extra(buf, m.extra);
}

std::string metrics_json_line(const EvalMetrics& m) {
  char buf[256];
  std::vector<std::pair<std::string, double>> extra = m.extra;
  if (m.runtime_s >= 0) extra.emplace_back("eval_runtime", m.runtime_s);
  if (!m.extra.empty()) {
    std::snprintf(buf, sizeof buf, "{\"step\":%lld,\"eval_loss\":%.9g}", static_cast<long long>(m.step), m.loss);
    return with_extra(buf, extra);
  }
  const double ppl = m.ppl();
  // JSON has no infinity: a perplexity that overflows a double is written as null.
  if (std::isfinite(ppl)) {
    std::snprintf(buf, sizeof buf, "{\"step\":%lld,\"eval_loss\":%.9g,\"eval_ppl\":%.9g}",
                  static_cast<long long>(m.step), m.loss, ppl);
  } else {
    std::snprintf(buf, sizeof buf, "{\"step\":%lld,\"eval_loss\":%.9g,\"eval_ppl\":null}",
                  static_cast<long long>(m.step), m.loss);
  }
  return with_extra(buf, extra);
}

StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::open(const std::string& path, bool append) {
  std::unique_ptr<MetricsWriter> w(new MetricsWriter());
  w->path_ = path;
  w->f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!w->f_) return ErrnoError("opening " + path);
  return w;
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

Status MetricsWriter::write(const StepMetrics& m) { return write_line(metrics_json_line(m)); }
Status MetricsWriter::write(const EvalMetrics& m) { return write_line(metrics_json_line(m)); }

Status MetricsWriter::write_line(const std::string& l) {
  std::string line = l + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return ErrnoError("writing " + path_);
  return Status::OK();
}

Status truncate_metrics(const std::string& path, int64_t max_step) {
  if (!file_exists(path)) return Status::OK();
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  std::string kept;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a line cut short by a kill: dropped
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    StatusOr<Json> j = parse_json(line, path);
    if (!j.ok() || !j->is_object() || !j->contains("step") || !(*j)["step"].is_number_integer()) continue;
    if ((*j)["step"].get<int64_t>() <= max_step) kept += line + "\n";
  }
  return write_file_atomic(path, kept);
}

}  // namespace st
