// write_safetensors: streams the tensors to "path.tmp.<pid>", fsyncs, then renames, so the final
// name only ever holds a complete file. Tensors are stored back to back: the reference reader
// (safetensors crate, used by transformers and PEFT) rejects holes in the data section, so
// alignment comes from padding the header, not from gaps.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "core/json.h"
#include "io/safetensors.h"

namespace st {
namespace {

Status write_all(int fd, const void* data, size_t n, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("writing " + tmp);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

StatusOr<std::string> build_header(const std::string& path, const std::vector<TensorToWrite>& tensors,
                                   const std::map<std::string, std::string>& metadata, size_t align) {
  Json h = Json::object();
  Json meta = Json::object();
  meta["format"] = "pt";  // transformers refuses shards whose metadata lacks a known format
  for (const auto& [k, v] : metadata) meta[k] = v;
  h["__metadata__"] = meta;
  std::set<std::string> names;
  uint64_t off = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      return InvalidArgument(Str() << path << ": invalid tensor name '" << t.name << "'");
    if (!names.insert(t.name).second) return InvalidArgument(Str() << path << ": duplicate tensor '" << t.name << "'");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return InvalidArgument(Str() << path << ": tensor '" << t.name << "' has a negative dimension");
      numel *= static_cast<uint64_t>(d);
    }
    const uint64_t nbytes = numel * dtype_size(t.dtype);
    if (nbytes > 0 && t.data == nullptr)
      return InvalidArgument(Str() << path << ": tensor '" << t.name << "' has no data");
    h[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + nbytes}}};
    off += nbytes;
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const std::exception& e) {
    return InvalidArgument(Str() << path << ": cannot serialize the header (tensor names must be UTF-8): " << e.what());
  }
  const size_t pad = (align - (8 + text.size()) % align) % align;
  text.append(pad, ' ');
  return text;
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata, size_t align) {
  if (align == 0 || align % 8 != 0)
    return InvalidArgument(Str() << path << ": safetensors alignment " << align << " is not a multiple of 8");
  ASSIGN_OR_RETURN(std::string header, build_header(path, tensors, metadata, align));
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("creating " + tmp);
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  uint8_t len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  Status s = write_all(fd, len, 8, tmp);
  if (s.ok()) s = write_all(fd, header.data(), header.size(), tmp);
  for (const TensorToWrite& t : tensors) {
    if (!s.ok()) break;
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    s = write_all(fd, t.data, numel * dtype_size(t.dtype), tmp);
  }
  if (!s.ok()) return fail(s);
  if (::fsync(fd) != 0) return fail(ErrnoError("flushing " + tmp));
  if (::close(fd) != 0) {
    Status c = ErrnoError("closing " + tmp);
    ::unlink(tmp.c_str());
    return c;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status r = ErrnoError("renaming " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return r;
  }
  return Status::OK();
}

}  // namespace st
