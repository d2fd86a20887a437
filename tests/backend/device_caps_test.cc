// Which GPUs the CUDA backend accepts (backend.h cuda_capability_supported): the kernels use bf16
// mma.sync and cp.async, so compute capability 8.0 on; older cards (T4, V100, P100) are refused by
// name and `device: auto` falls back to the CPU instead of failing inside a kernel launch.
#include <gtest/gtest.h>

#include "backend/backend.h"

namespace st {
namespace {

TEST(DeviceCaps, AmpereAndNewerOnly) {
  for (auto [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 7}, {8, 9}, {9, 0}, {10, 0}, {12, 0}})
    EXPECT_TRUE(cuda_capability_supported(major, minor)) << major << "." << minor;
  for (auto [major, minor] : {std::pair{7, 5}, {7, 0}, {6, 1}, {5, 2}, {3, 7}})
    EXPECT_FALSE(cuda_capability_supported(major, minor)) << major << "." << minor;
}

}  // namespace
}  // namespace st
