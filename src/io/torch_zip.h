// PyTorch checkpoints (pytorch_model.bin, as transformers saved models before safetensors): the
// tensors of a torch.save zip archive, read as hostile input without running any of its pickle.
//
// Note [torch zip]: torch.save (since 1.6) writes a zip archive whose entries are stored, not
// compressed: ARCHIVE/data.pkl, a pickle (protocol 2) of the state dict, and ARCHIVE/data/KEY, the
// raw bytes of each storage (little-endian, per ARCHIVE/byteorder). In the pickle a tensor is
// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...) and a storage a persistent
// id ('storage', torch.<Type>Storage, KEY, location, numel). The pickle is interpreted by a
// small stack machine that knows only the opcodes torch.save emits and builds only dicts, lists,
// tuples, scalars, strings, storages and tensors: a GLOBAL other than collections.OrderedDict,
// torch._utils._rebuild_tensor_v2 / _rebuild_parameter(_with_state) and the storage types is
// refused by name (it would be code). Every count and offset is checked against the bytes there
// (ZIP64 included); a tensor's extent must lie inside its storage. The pre-1.6 format (a bare
// pickle stream) and compressed entries are refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace st {

struct TorchTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape, stride;  // stride in elements
  uint64_t file_offset = 0;            // byte offset in the file of element [0, ..., 0]
  bool contiguous() const;             // row-major with no gaps
};

// The tensors of the top-level dict of a torch.save archive held in data[0, size); values that are
// not tensors (a training step count, nested metadata) are skipped. `what` names the file.
StatusOr<std::vector<TorchTensor>> read_torch_zip(const uint8_t* data, size_t size, const std::string& what);

}  // namespace st
