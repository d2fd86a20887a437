// ThreadCommunicator against a trivial oracle (the rank-ordered f32 sum computed here), run by
// real threads; plus abort (no hang), the launcher-variable parser and the TCP rendezvous.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/communicator.h"
#include "dist/rendezvous.h"

namespace st {
namespace {

struct Group {
  explicit Group(int n) {
    for (int r = 0; r < n; ++r) {
      owned.push_back(make_backend(DeviceKind::kCpu, {.num_threads = 1}).value());
      bes.push_back(owned.back().get());
    }
    comms = make_thread_communicators(bes);
  }
  // Runs fn(rank) on one thread per rank.
  template <typename F>
  void run(F fn) {
    std::vector<std::thread> ts;
    for (int r = 0; r < static_cast<int>(comms.size()); ++r) ts.emplace_back([&, r] { fn(r); });
    for (auto& t : ts) t.join();
  }
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<Backend*> bes;
  std::vector<std::unique_ptr<Communicator>> comms;
};

// Values whose f32 sums depend on the order (mixed magnitudes).
float value(int rank, size_t i) {
  const float mag[] = {1e8f, 1.0f, -1e8f, 3.3e-3f, 7.0f};
  return mag[(rank + i) % 5] * (1.0f + 0.01f * static_cast<float>(i % 97)) + static_cast<float>(rank);
}

std::vector<std::vector<float>> all_reduce_once(int n, size_t count) {
  Group g(n);
  std::vector<std::vector<float>> out(n);
  g.run([&](int r) {
    out[r].resize(count);
    for (size_t i = 0; i < count; ++i) out[r][i] = value(r, i);
    ASSERT_TRUE(g.comms[r]->all_reduce_sum(out[r].data(), count, StreamId::kCompute).ok());
  });
  return out;
}

TEST(ThreadCommunicator, AllReduceIsTheRankOrderedSum) {
  for (int n : {1, 2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{1000}, size_t{4099}}) {
      auto got = all_reduce_once(n, count);
      for (size_t i = 0; i < count; ++i) {
        float want = value(0, i);
        for (int r = 1; r < n; ++r) want += value(r, i);
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(std::memcmp(&got[r][i], &want, 4), 0) << "n " << n << " count " << count << " i " << i << " rank " << r;
      }
    }
  }
}

TEST(ThreadCommunicator, OrderMattersSoTheOracleIsSharp) {
  // Another order of the same values gives different bits somewhere: the test above can fail.
  int differ = 0;
  for (size_t i = 0; i < 1000; ++i) {
    float fwd = value(0, i) + value(1, i) + value(2, i);
    float rev = value(2, i) + value(1, i) + value(0, i);
    differ += std::memcmp(&fwd, &rev, 4) != 0;
  }
  EXPECT_GT(differ, 0);
}

TEST(ThreadCommunicator, DeterministicRunToRun) {
  auto a = all_reduce_once(3, 3001), b = all_reduce_once(3, 3001);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(std::memcmp(a[r].data(), b[r].data(), a[r].size() * 4), 0);
}

TEST(ThreadCommunicator, BroadcastHostSumsAndBarrier) {
  Group g(3);
  std::vector<std::vector<float>> buf(3);
  std::vector<int64_t> isum(3);
  std::vector<double> dsum(3);
  g.run([&](int r) {
    Communicator& c = *g.comms[r];
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), 3);
    for (int root = 0; root < 3; ++root) {
      buf[r].assign(17, static_cast<float>(r * 100));
      ASSERT_TRUE(c.broadcast(buf[r].data(), 17, root, StreamId::kCompute).ok());
      for (float v : buf[r]) ASSERT_EQ(v, static_cast<float>(root * 100)) << "root " << root << " rank " << r;
    }
    int64_t v[2] = {int64_t{1} << 40, r};
    ASSERT_TRUE(c.all_reduce_sum_host(v, 2).ok());
    isum[r] = v[0] + v[1];
    double d = 0.5 * r;
    ASSERT_TRUE(c.all_reduce_sum_host(&d, 1).ok());
    dsum[r] = d;
    ASSERT_TRUE(c.barrier().ok());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(isum[r], 3 * (int64_t{1} << 40) + 3);
    EXPECT_EQ(dsum[r], 1.5);
  }
}

TEST(ThreadCommunicator, AbortWakesTheOthers) {
  Group g(3);
  std::vector<Status> st(3);
  g.run([&](int r) {
    if (r == 1) {
      g.comms[r]->abort("replica 1 failed to load a layer");
      st[r] = Cancelled("self");
      return;
    }
    std::vector<float> b(8, 1.0f);
    st[r] = g.comms[r]->all_reduce_sum(b.data(), b.size(), StreamId::kCompute);  // would hang without abort
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(st[r].code(), StatusCode::kCancelled);
    EXPECT_NE(st[r].to_string().find("replica 1 failed"), std::string::npos) << st[r].to_string();
  }
  EXPECT_EQ(g.comms[0]->barrier().code(), StatusCode::kCancelled);  // sticky
}

TEST(DistEnv, ParsesTorchrunVariables) {
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "2", 1);
  ::setenv("LOCAL_RANK", "0", 1);
  ::setenv("MASTER_ADDR", "10.0.0.7", 1);
  ::setenv("MASTER_PORT", "29511", 1);
  auto e = dist_env_from_environment();
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->num_nodes, 4);
  EXPECT_EQ(e->node_rank, 2);
  EXPECT_EQ(e->master_addr, "10.0.0.7");
  EXPECT_EQ(e->master_port, 29511);
  ::setenv("RANK", "4", 1);
  EXPECT_EQ(dist_env_from_environment().status().code(), StatusCode::kInvalidArgument);
  ::setenv("RANK", "x", 1);
  auto bad = dist_env_from_environment();
  EXPECT_NE(bad.status().to_string().find("RANK"), std::string::npos);
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
  auto single = dist_env_from_environment();
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->num_nodes, 1);
  EXPECT_EQ(single->node_rank, 0);
}

TEST(Rendezvous, ServesTheBlobToEveryNode) {
  auto server = RendezvousServer::listen(0);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const int port = (*server)->port();
  std::string blob(128, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 7);
  Status served;
  std::thread t([&] { served = (*server)->serve(blob, 3, 10000); });
  std::vector<std::string> got(3);
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c)
    clients.emplace_back([&, c] { got[c] = rendezvous_fetch("127.0.0.1", port, 10000).value(); });
  for (auto& c : clients) c.join();
  t.join();
  EXPECT_TRUE(served.ok()) << served.to_string();
  for (const std::string& g : got) EXPECT_EQ(g, blob);
}

TEST(Rendezvous, TimesOutClearly) {
  auto server = RendezvousServer::listen(0);
  ASSERT_TRUE(server.ok());
  Status s = (*server)->serve("x", 1, 100);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.to_string().find("0 of 1"), std::string::npos) << s.to_string();
  const int dead_port = (*server)->port();
  server->reset();
  auto f = rendezvous_fetch("127.0.0.1", dead_port, 200);
  EXPECT_EQ(f.status().code(), StatusCode::kIOError);
  EXPECT_NE(f.status().to_string().find("MASTER_ADDR"), std::string::npos);
}

TEST(Nccl, AbsentBuildSaysSo) {
  if (nccl_available()) GTEST_SUCCEED() << "NCCL build: make_nccl_communicators needs GPUs (not run in CI)";
  else EXPECT_EQ(make_nccl_communicators({0}, {nullptr}, DistEnv{}).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace st
