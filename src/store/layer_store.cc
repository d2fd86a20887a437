#include "store/layer_store.h"

namespace st {

StatusOr<std::vector<char>> extras_to_host(Backend* be, LayerStore& store) {
  const size_t n = store.manifest().extras_bytes;
  ASSIGN_OR_RETURN(void* dev, be->alloc(n), "staging the extras blob (" << n << " bytes)");
  Status s = store.load_extras(dev);
  std::vector<char> host;
  if (s.ok()) {
    host.resize(n);
    be->copy_d2h(host.data(), dev, n, StreamId::kCompute);
    be->sync_stream(StreamId::kCompute);
  }
  be->free(dev);
  RETURN_IF_ERROR(s);
  return host;
}

}  // namespace st
