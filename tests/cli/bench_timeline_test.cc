// cli/bench_timeline.h Note [device timeline], on the CPU backend (events fire as recorded): the
// decorators mark what they should in each stream's order, only while armed, and the CSV holds one
// line per mark with times that do not run backwards within a stream.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <vector>

#include "backend/backend.h"
#include "cli/bench_timeline.h"
#include "core/file.h"

namespace st {
namespace {

class FakeStore : public LayerStore {
 public:
  explicit FakeStore(Backend* be) : be_(be), blob_(64, 7) { m_.num_layers = 4, m_.layer_bytes = 64; }
  const StoreManifest& manifest() const override { return m_; }
  const std::string& dir() const override { return dir_; }
  const char* tier() const override { return "fake"; }
  size_t host_bytes() const override { return 0; }
  Status load_layer(int, void* dst) override {
    be_->copy_h2d(dst, blob_.data(), blob_.size(), StreamId::kH2D);
    return Status::OK();
  }
  Status load_extras(void*) override { return Status::OK(); }

 private:
  Backend* be_;
  StoreManifest m_;
  std::string dir_ = "/fake";
  std::vector<char> blob_;
};

// Loads each visited layer through the store (as a pool would on a miss).
class FakeSource : public LayerSource {
 public:
  FakeSource(LayerStore* s, void* buf) : store_(s), buf_(buf) {}
  void begin_step(const std::vector<int>&) override {}
  LayerWeights acquire(int layer) override {
    EXPECT_TRUE(store_->load_layer(layer, buf_).ok());
    return LayerWeights{};
  }
  void release(int) override {}
  void end_step() override {}

 private:
  LayerStore* store_;
  void* buf_;
};

TEST(DeviceTimeline, MarksCopiesAndVisitsWhileArmedAndWritesThemAsCsv) {
  auto be = make_backend(DeviceKind::kCpu).value();
  std::vector<char> dev(64);
  DeviceTimeline t(be.get());
  FakeStore store(be.get());
  TimedStore timed(&store, &t);
  FakeSource inner(&timed, dev.data());
  TimelineSource src(&inner, &t);
  src.acquire(0);  // not armed: no marks
  src.release(0);
  t.arm(true);
  for (int l : {1, 2, 3}) {
    src.acquire(l);
    src.release(l);
  }
  t.arm(false);
  src.acquire(0);
  src.release(0);
  const std::string path = testing::TempDir() + "/timeline.csv";
  ASSERT_TRUE(t.write_csv(path).ok());
  std::istringstream in(*read_file_to_string(path));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "event,layer,us");
  std::map<std::string, std::vector<int>> layers;
  std::map<std::string, double> last;  // per stream
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    std::istringstream f(line);
    std::string ev, layer, us;
    std::getline(f, ev, ',');
    std::getline(f, layer, ',');
    std::getline(f, us, ',');
    layers[ev].push_back(std::stoi(layer));
    const std::string stream = ev.rfind("copy", 0) == 0 ? "h2d" : "compute";
    const double t_us = std::stod(us);
    EXPECT_GE(t_us, 0);
    if (last.count(stream)) {
      EXPECT_GE(t_us, last[stream]) << line;
    }
    last[stream] = t_us;
  }
  EXPECT_EQ(lines, 15);  // 3 visits x (acquire, ready, release, copy_start, copy_end)
  for (const char* ev : {"acquire", "ready", "release", "copy_start", "copy_end"})
    EXPECT_EQ(layers[ev], (std::vector<int>{1, 2, 3})) << ev;
  Status bad = t.write_csv("/nonexistent-dir/timeline.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.to_string().find("/nonexistent-dir/timeline.csv"), std::string::npos) << bad.to_string();
}

}  // namespace
}  // namespace st
