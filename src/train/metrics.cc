#include "train/metrics.h"

#include <memory>

namespace st {

std::string metrics_json_line(const StepMetrics& m) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"tokens\":%lld,\"tok_s\":%.6g,"
                "\"elapsed_s\":%.6g}",
                static_cast<long long>(m.step), m.loss, m.lr, m.grad_norm, static_cast<long long>(m.tokens),
                m.tok_s, m.elapsed_s);
  return buf;
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

Status MetricsWriter::write(const StepMetrics& m) {
  std::string line = metrics_json_line(m) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return ErrnoError("writing " + path_);
  return Status::OK();
}

}  // namespace st
