// DataLoaderSource: the trainer's BatchSource over data/'s DataLoader (all dataset types,
// packing, padding, per-epoch shuffle, exact-resume positions). The trainer drives epochs:
// start_epoch(e) seeks to the start of epoch e and next() stops at that epoch's end.
#pragma once

#include <memory>
#include <vector>

#include "data/data_loader.h"
#include "data/datasets.h"
#include "train/batch_source.h"

namespace st {

class DataLoaderSource : public BatchSource {
 public:
  // `opt.num_epochs` is ignored: epochs are unbounded here, the trainer decides when to stop.
  DataLoaderSource(std::shared_ptr<const std::vector<Sample>> samples, LoaderOptions opt);

  Status start_epoch(int64_t epoch) override;
  StatusOr<bool> next(Batch* out) override;
  int64_t micro_batches_per_epoch() const override { return loader_.batches_in_epoch(0); }

  LoaderPosition position() const { return loader_.position(); }
  Status seek(const LoaderPosition& p) { return loader_.seek(p); }
  int64_t num_samples() const { return loader_.num_samples(); }

 private:
  static LoaderOptions unbounded(LoaderOptions o);
  DataLoader loader_;
  int64_t epoch_ = 0;
};

}  // namespace st
