#include "cli/run_train.h"

namespace st {

Status run_train(const TrainConfig& cfg) {
  (void)cfg;
  return Unimplemented("training is not wired in yet: src/train has no trainer entry point");
}

}  // namespace st
