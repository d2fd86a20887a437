#include "store/sharder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/checksum.h"
#include "core/file.h"
#include "io/fingerprint.h"
#include "model/pack.h"
#include "model/weights.h"

namespace st {
namespace {

namespace fs = std::filesystem;

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// Safetensors header whose data section is exactly `blob_bytes` long, tensors at their layout
// offsets, gaps covered by U8 pad tensors, padded with spaces so data starts 4096-aligned.
std::string make_header(std::vector<Entry> entries, uint64_t blob_bytes, const std::string& kind) {
  std::vector<Entry> all;
  uint64_t cursor = 0;
  for (const Entry& e : entries) {
    if (e.begin > cursor)
      all.push_back({"streamtune.pad." + std::to_string(cursor), DType::kU8,
                     {static_cast<int64_t>(e.begin - cursor)}, cursor, e.begin});
    all.push_back(e);
    cursor = e.end;
  }
  if (blob_bytes > cursor)
    all.push_back({"streamtune.pad." + std::to_string(cursor), DType::kU8,
                   {static_cast<int64_t>(blob_bytes - cursor)}, cursor, blob_bytes});
  OrderedJson h;
  h["__metadata__"] = OrderedJson{{"format", "pt"}, {"streamtune", kind}};
  for (const Entry& e : all)
    h[e.name] = OrderedJson{{"dtype", dtype_safetensors_name(e.dtype)}, {"shape", e.shape},
                            {"data_offsets", {e.begin, e.end}}};
  std::string json = h.dump();
  uint64_t data_start = round_up(8 + json.size(), kStoreIoAlign);
  json.append(data_start - 8 - json.size(), ' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

Status write_all(int fd, const void* p, size_t n, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ErrnoError("writing " + path);
    c += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

StatusOr<StoreFile> write_blob_file(const std::string& dir, const std::string& name, const std::string& header,
                                    const void* blob, uint64_t bytes) {
  std::string path = path_join(dir, name);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("creating " + path);
  Status s = write_all(fd, header.data(), header.size(), path);
  if (s.ok()) s = write_all(fd, blob, bytes, path);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoError("flushing " + path);
  ::close(fd);
  RETURN_IF_ERROR(s);
  return StoreFile{name, header.size() + bytes, header.size(), bytes, checksum64(blob, bytes)};
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

StatusOr<std::unique_ptr<void, FreeDeleter>> alloc_blob(uint64_t bytes) {
  void* p = std::aligned_alloc(kStoreIoAlign, round_up(bytes, kStoreIoAlign));
  if (p == nullptr) return ResourceExhausted(Str() << "allocating a " << bytes << "-byte host blob for sharding");
  return std::unique_ptr<void, FreeDeleter>(p);
}

// pack_*_from zero the blob first: padding is deterministic, identical stores byte for byte.
StatusOr<StoreFile> write_layer(const ModelSource& src, const LayerLayout& layout, int layer, void* blob,
                                const std::string& dir) {
  RETURN_IF_ERROR(pack_layer_from(src, layout, layer, blob));
  std::vector<Entry> entries;
  for (const LayerTensorSpec& s : layout.tensors)
    entries.push_back({layer_tensor_name(layer, s), s.dtype, s.shape, s.offset, s.offset + s.nbytes});
  std::string header = make_header(entries, layout.bytes, "layer " + std::to_string(layer));
  return write_blob_file(dir, layer_file_name(layer), header, blob, layout.bytes);
}

StatusOr<StoreFile> write_extras(const ModelSource& src, const ExtrasLayout& layout, void* blob,
                                 const std::string& dir) {
  RETURN_IF_ERROR(pack_extras_from(src, layout, blob));
  std::vector<Entry> entries;
  for (const LayerTensorSpec& s : layout.tensors)
    entries.push_back({s.hf_suffix, s.dtype, s.shape, s.offset, s.offset + s.nbytes});
  std::string header = make_header(entries, layout.bytes, "extras");
  return write_blob_file(dir, kExtrasFileName, header, blob, layout.bytes);
}

// Written into a directory this process made (the ".tmp.<pid>" build) or is about to retire (the
// old store renamed to ".old.<pid>"): only a sibling carrying it is ever removed, so a user's own
// directory that happens to be named "<out>.old.123" is left alone (session 22 audit).
constexpr const char* kScratchMarker = ".streamtune-scratch";

bool is_scratch_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && fs::is_regular_file(p / kScratchMarker, ec);
}

Status mark_scratch(const std::string& dir) {
  return write_file_atomic(path_join(dir, kScratchMarker), "streamtune scratch directory: safe to delete\n");
}

// Removes "<base>.tmp.<pid>" / "<base>.old.<pid>" scratch siblings left by processes that are gone.
void remove_stale_siblings(const std::string& final_dir) {
  std::error_code ec;
  fs::path parent = fs::path(final_dir).parent_path();
  std::string base = fs::path(final_dir).filename().string();
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    std::string n = e.path().filename().string();
    for (const char* tag : {".tmp.", ".old."}) {
      std::string prefix = base + tag;
      if (n.rfind(prefix, 0) != 0) continue;
      long pid = std::strtol(n.c_str() + prefix.size(), nullptr, 10);
      bool alive = pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
      if (!alive && is_scratch_dir(e.path())) fs::remove_all(e.path(), ec);
    }
  }
}

// What may be replaced at the output path: nothing, an empty directory, or an earlier store (one
// with a manifest, even a damaged one). Anything else is the user's and is refused by name, and so
// is a directory holding the source model itself.
Status check_replaceable(const std::string& dir, const ModelSource& src) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return Status::OK();
  for (const std::string& f : src.files()) {
    if (path_is_within(f, dir))
      return InvalidArgument(dir + " holds the source model (" + f + "); the store needs a directory of its own");
  }
  if (!fs::is_directory(st))
    return InvalidArgument(dir + " exists and is not a directory; choose another --out or remove it");
  if (fs::is_empty(dir, ec)) return Status::OK();
  // An earlier store, even a damaged one: its manifest says so. Web apps and extensions have a
  // manifest.json too (session 23 audit: one was replaced).
  const std::string mpath = path_join(dir, kManifestName);
  StatusOr<std::string> text = file_exists(mpath) ? read_file_to_string(mpath) : StatusOr<std::string>(std::string());
  if (text.ok() && text->find("\"streamtune-layer-store\"") != std::string::npos) return Status::OK();
  return InvalidArgument(dir + " exists and is not a streamtune store (no " + std::string(kManifestName) +
                         " of one); refusing to replace it: choose another --out or remove it");
}

Status write_store(const ModelSource& src, const ShardOptions& opts, const std::string& tmp,
                   StoreManifest& m) {
  const ModelConfig& c = src.config();
  LayerLayout layout = make_layer_layout(c, opts.dtype, opts.quant);
  ExtrasLayout extras = make_extras_layout(c, opts.dtype);
  ASSIGN_OR_RETURN(auto blob, alloc_blob(std::max<uint64_t>(layout.bytes, extras.bytes)));
  int total = static_cast<int>(c.num_layers) + 1;
  for (int l = 0; l < c.num_layers; ++l) {
    ASSIGN_OR_RETURN(StoreFile f, write_layer(src, layout, l, blob.get(), tmp));
    m.layers.push_back(f);
    if (opts.progress) opts.progress(l + 1, total, f.name);
  }
  ASSIGN_OR_RETURN(m.extras, write_extras(src, extras, blob.get(), tmp));
  if (opts.progress) opts.progress(total, total, m.extras.name);
  m.layer_bytes = layout.bytes;
  m.extras_bytes = extras.bytes;
  // The manifest goes last: only a complete directory has one.
  return write_file_atomic(path_join(tmp, kManifestName), manifest_to_json(m).dump(2) + "\n");
}

// Moves `tmp` to `final_dir`, replacing an old store there (marked, renamed aside, then removed).
// The installed store carries no scratch marker; a crash between the two renames leaves the old
// store marked at ".old.<pid>", which a later run then removes.
Status install_store(const std::string& tmp, const std::string& final_dir) {
  std::error_code ec;
  std::string old = final_dir + ".old." + std::to_string(::getpid());
  fs::remove(path_join(tmp, kScratchMarker), ec);
  if (fs::exists(final_dir, ec)) {
    RETURN_IF_ERROR(mark_scratch(final_dir));
    fs::rename(final_dir, old, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::remove(path_join(final_dir, kScratchMarker), ec);
      return IOError("moving the outdated store " + final_dir + " aside: " + why);
    }
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) return IOError("renaming " + tmp + " to " + final_dir + ": " + ec.message());
  fs::remove_all(old, ec);
  return Status::OK();
}

std::string reuse_reason(const std::string& dir, const std::string& fp, DType dtype, BaseQuant quant, bool force,
                         StoreManifest* out) {
  if (force) return "rebuilding (--force)";
  StatusOr<StoreManifest> m = open_store_manifest(dir);
  if (!m.ok()) {
    if (m.status().code() == StatusCode::kNotFound) return "building a new store";
    if (m.status().message().find("store format version") != std::string::npos)
      return "rebuilding: the store format changed (" + m.status().message() + ")";
    return "rebuilding: the existing store is damaged (" + m.status().message() + ")";
  }
  if (m->fingerprint != fp) return "rebuilding: the source changed (fingerprint " + m->fingerprint + " -> " + fp + ")";
  if (m->dtype != dtype) return Str() << "rebuilding: dtype changed (" << dtype_name(m->dtype) << " -> " << dtype_name(dtype) << ")";
  if (m->quant != quant)
    return Str() << "rebuilding: quantization changed (" << base_quant_name(m->quant) << " -> " << base_quant_name(quant) << ")";
  *out = *m;
  return "";
}

}  // namespace

std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return path_join(xdg, "streamtune");
  const char* home = std::getenv("HOME");
  return path_join(path_join(home && *home ? home : ".", ".cache"), "streamtune");
}

std::string default_store_dir(const std::string& cache_dir, const std::string& fingerprint, DType dtype,
                              BaseQuant quant) {
  std::string cache = cache_dir.empty() ? default_cache_dir() : cache_dir;
  std::string name = fingerprint + "-" + dtype_name(dtype);
  if (quant != BaseQuant::kNone) name += std::string("-") + base_quant_name(quant);
  return path_join(path_join(cache, "stores"), name);
}

StatusOr<ShardResult> shard_model(const ModelSource& src, const ShardOptions& opts) {
  ASSIGN_OR_RETURN(std::string fp, source_fingerprint(src.files()), "fingerprinting " << src.describe());
  ShardResult r;
  if (const std::string why = base_layout_error(src.config(), opts.dtype, opts.quant); !why.empty())
    return InvalidArgument(Str() << src.describe() << ": " << why);
  r.dir = opts.out_dir.empty() ? default_store_dir(opts.cache_dir, fp, opts.dtype, opts.quant) : opts.out_dir;
  while (r.dir.size() > 1 && r.dir.back() == '/') r.dir.pop_back();
  r.reason = reuse_reason(r.dir, fp, opts.dtype, opts.quant, opts.force, &r.manifest);
  if (r.reason.empty()) {
    r.reused = true;
    r.reason = "reusing the up-to-date store (fingerprint " + fp + ", " + dtype_name(opts.dtype) +
               (opts.quant != BaseQuant::kNone ? std::string(", ") + base_quant_name(opts.quant) : "") + ")";
    return r;
  }
  RETURN_IF_ERROR(check_replaceable(r.dir, src));
  RETURN_IF_ERROR(make_dirs(path_dirname(r.dir)));
  remove_stale_siblings(r.dir);
  std::string tmp = r.dir + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  RETURN_IF_ERROR(make_dirs(tmp));
  RETURN_IF_ERROR(mark_scratch(tmp));
  StoreManifest m;
  m.config = src.config();
  m.dtype = opts.dtype;
  m.quant = opts.quant;
  m.num_layers = static_cast<int>(src.config().num_layers);
  m.source = src.describe();
  m.fingerprint = fp;
  Status s = write_store(src, opts, tmp, m);
  if (s.ok()) s = install_store(tmp, r.dir);
  if (!s.ok()) {
    fs::remove_all(tmp, ec);
    return s.with_context("sharding " + src.describe() + " into " + r.dir);
  }
  r.manifest = std::move(m);
  return r;
}

StatusOr<ShardResult> shard_model_path(const std::string& model_path, const ShardOptions& opts) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelSource> src, open_model_source(model_path));
  return shard_model(*src, opts);
}

}  // namespace st
