// backend/speed_probe.h: the planner's time estimates (stream/planner.h Note [host extras plan])
// are made only from a device's measured speeds; the CPU backend reports them unknown (zeros), so
// CPU runs keep the fewest-bytes rule. (The CUDA probe ran in `train` on the H200: RESULTS session
// 18 call 8.)
#include <gtest/gtest.h>

#include "backend/speed_probe.h"

namespace st {
namespace {

TEST(SpeedProbe, CpuSpeedsAreUnknown) {
  StatusOr<std::unique_ptr<Backend>> be = make_backend(DeviceKind::kCpu);
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  const DeviceSpeed s = probe_device_speed(be->get());
  EXPECT_EQ(s.link_gbps, 0.0);
  EXPECT_EQ(s.gemm_tflops, 0.0);
}

}  // namespace
}  // namespace st
