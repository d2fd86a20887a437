#include "io/gguf_write.h"

#include "io/detail/gguf_value.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace st {
namespace {

// Little-endian serialization into a growing buffer (the header is small next to the tensors).
struct Out {
  std::vector<uint8_t> b;
  void raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  template <typename T>
  void put(T v) {
    raw(&v, sizeof v);
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
};

Status put_value(Out& o, const std::string& key, const GgufValue& v) {
  o.put<uint32_t>(static_cast<uint32_t>(v.type));
  switch (v.type) {
    case GgufValueType::kString: o.str(v.str); return Status::OK();
    case GgufValueType::kF32: o.put<float>(static_cast<float>(v.f)); return Status::OK();
    case GgufValueType::kF64: o.put<double>(v.f); return Status::OK();
    case GgufValueType::kArray: {
      o.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
      o.put<uint64_t>(v.count);
      if (v.elem_type == GgufValueType::kString) {
        if (v.strings.size() != v.count) return InvalidArgument(Str() << "gguf write: key '" << key << "': string array of " << v.count << " holds " << v.strings.size());
        for (std::string_view s : v.strings) o.str(s);
        return Status::OK();
      }
      const size_t es = detail::gguf_scalar_size(v.elem_type);
      if (es == 0 || (v.count > 0 && v.raw == nullptr))
        return InvalidArgument(Str() << "gguf write: key '" << key << "': array of unsupported element type");
      o.raw(v.raw, static_cast<size_t>(v.count) * es);
      return Status::OK();
    }
    default: break;
  }
  const size_t n = detail::gguf_scalar_size(v.type);
  if (n == 0) return InvalidArgument(Str() << "gguf write: key '" << key << "': unsupported value type");
  const bool is_signed = v.type == GgufValueType::kI8 || v.type == GgufValueType::kI16 ||
                         v.type == GgufValueType::kI32 || v.type == GgufValueType::kI64;
  const uint64_t bits = is_signed ? static_cast<uint64_t>(v.i) : v.u;
  o.raw(&bits, n);  // little-endian: the low n bytes
  return Status::OK();
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IOError(Str() << "writing " << path << ": " << std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

StatusOr<uint64_t> ggml_nbytes(GgmlType type, const std::vector<int64_t>& ne) {
  const GgmlTypeTraits& tr = ggml_traits(type);
  if (ne.empty() || ne[0] % tr.block_elems != 0)
    return InvalidArgument(Str() << "gguf write: ne[0] is not a multiple of " << tr.name << "'s block of " << tr.block_elems);
  uint64_t rows = 1;
  for (size_t k = 1; k < ne.size(); ++k) rows *= static_cast<uint64_t>(ne[k]);
  return rows * static_cast<uint64_t>(ne[0] / tr.block_elems) * static_cast<uint64_t>(tr.block_bytes);
}

Status write_gguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& kv,
                  uint64_t alignment, const std::vector<GgufOutTensor>& tensors, const GgufFill& fill) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return InvalidArgument(Str() << "gguf write " << path << ": alignment " << alignment << " is not a power of two");
  Out h;
  h.put<uint32_t>(0x46554747u);  // "GGUF"
  h.put<uint32_t>(3);
  h.put<uint64_t>(tensors.size());
  h.put<uint64_t>(kv.size());
  for (const auto& [key, v] : kv) {
    h.str(key);
    RETURN_IF_ERROR(put_value(h, key, v), "gguf write " << path);
  }
  uint64_t offset = 0;
  for (const GgufOutTensor& t : tensors) {
    ASSIGN_OR_RETURN(uint64_t nb, ggml_nbytes(t.type, t.ne), "gguf write " << path << ": tensor '" << t.name << "'");
    if (nb != t.nbytes)
      return InvalidArgument(Str() << "gguf write " << path << ": tensor '" << t.name << "' has " << t.nbytes
                                   << " bytes, its type and shape take " << nb);
    h.str(t.name);
    h.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) h.put<uint64_t>(static_cast<uint64_t>(d));
    h.put<uint32_t>(static_cast<uint32_t>(t.type));
    h.put<uint64_t>(offset);
    offset = align_up(offset + t.nbytes, alignment);
  }
  h.b.resize(align_up(h.b.size(), alignment), 0);

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IOError(Str() << "creating " << tmp << ": " << std::strerror(errno));
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  Status s = write_all(fd, h.b.data(), h.b.size(), tmp);
  if (!s.ok()) return fail(s);
  std::vector<uint8_t> buf;
  const std::vector<uint8_t> pad(alignment, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    buf.clear();
    s = fill(i, &buf);
    if (!s.ok()) return fail(s.with_context(Str() << "gguf write " << path << ": tensor '" << tensors[i].name << "'"));
    if (buf.size() != tensors[i].nbytes)
      return fail(InvalidArgument(Str() << "gguf write " << path << ": tensor '" << tensors[i].name << "': "
                                        << buf.size() << " bytes produced, " << tensors[i].nbytes << " expected"));
    s = write_all(fd, buf.data(), buf.size(), tmp);
    const uint64_t gap = align_up(buf.size(), alignment) - buf.size();
    if (s.ok() && i + 1 < tensors.size() && gap > 0) s = write_all(fd, pad.data(), gap, tmp);
    if (!s.ok()) return fail(s);
  }
  if (::fsync(fd) != 0) return fail(IOError(Str() << "fsync " << tmp << ": " << std::strerror(errno)));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return IOError(Str() << "closing " << tmp << ": " << std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return IOError(Str() << "renaming " << tmp << " to " << path << ": " << why);
  }
  return Status::OK();
}

}  // namespace st
