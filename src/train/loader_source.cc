#include "train/loader_source.h"

#include <limits>

namespace st {

LoaderOptions DataLoaderSource::unbounded(LoaderOptions o) {
  o.num_epochs = std::numeric_limits<int32_t>::max();
  return o;
}

DataLoaderSource::DataLoaderSource(std::shared_ptr<const std::vector<Sample>> samples, LoaderOptions opt)
    : loader_(std::move(samples), unbounded(opt)) {}

Status DataLoaderSource::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  return loader_.seek(LoaderPosition{epoch, 0});
}

StatusOr<bool> DataLoaderSource::next(Batch* out) {
  LoaderPosition p = loader_.position();
  if (p.epoch != epoch_ || p.index >= loader_.num_samples()) return false;
  return loader_.next(out);
}

}  // namespace st
