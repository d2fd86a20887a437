// dist_env_from_environment (communicator.h) and the no-NCCL stubs.
#include <cstdlib>
#include <string>

#include "dist/communicator.h"

namespace st {
namespace {

// First set variable of `names`; "" when none is.
std::string first_env(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  }
  return "";
}

// Parses the first set variable of `names` as an int in [lo, hi]; keeps *out when none is set.
Status int_env(std::initializer_list<const char*> names, int lo, int hi, int* out) {
  const char* which = nullptr;
  const std::string v = first_env(names, &which);
  if (v.empty()) return Status::OK();
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || x < lo || x > hi)
    return InvalidArgument(Str() << which << "='" << v << "' is not an integer in [" << lo << ", " << hi << "]");
  *out = static_cast<int>(x);
  return Status::OK();
}

}  // namespace

StatusOr<DistEnv> dist_env_from_environment() {
  DistEnv e;
  RETURN_IF_ERROR(int_env({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1, 1 << 20, &e.num_nodes));
  RETURN_IF_ERROR(int_env({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, 0, 1 << 20, &e.node_rank));
  RETURN_IF_ERROR(int_env({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0, 1 << 20, &e.local_rank));
  RETURN_IF_ERROR(int_env({"MASTER_PORT"}, 1, 65535, &e.master_port));
  const char* which = nullptr;
  const std::string addr = first_env({"MASTER_ADDR"}, &which);
  if (!addr.empty()) e.master_addr = addr;
  if (e.node_rank >= e.num_nodes)
    return InvalidArgument(Str() << "RANK " << e.node_rank << " is not below WORLD_SIZE " << e.num_nodes);
  if (e.num_nodes > 1 && addr.empty())
    return InvalidArgument(Str() << "WORLD_SIZE is " << e.num_nodes << " but MASTER_ADDR is not set");
  return e;
}

#ifndef ST_HAVE_NCCL
bool nccl_available() { return false; }

StatusOr<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(const std::vector<int>&,
                                                                             const std::vector<Backend*>&,
                                                                             const DistEnv&) {
  return Unimplemented("this build of streamtune has no NCCL (multi-GPU data parallelism needs CUDA + NCCL)");
}
#endif

}  // namespace st
