#include "store/manifest.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "core/checksum.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "model/pack.h"
#include "model/weights.h"

namespace st {
namespace {

Json file_to_json(const StoreFile& f) {
  return Json{{"name", f.name},
              {"size", f.size},
              {"data_start", f.data_start},
              {"bytes", f.bytes},
              {"checksum", checksum_hex(f.checksum)}};
}

StatusOr<StoreFile> file_from_json(const Json& j, const std::string& what) {
  if (!j.is_object()) return Corruption(what + ": a files entry is not an object");
  StoreFile f;
  ASSIGN_OR_RETURN(f.name, json_string(j, "name", what));
  ASSIGN_OR_RETURN(int64_t size, json_int(j, "size", what));
  ASSIGN_OR_RETURN(int64_t ds, json_int(j, "data_start", what));
  ASSIGN_OR_RETURN(int64_t bytes, json_int(j, "bytes", what));
  if (size < 0 || ds < 0 || bytes < 0) return Corruption(what + ": negative size for " + f.name);
  ASSIGN_OR_RETURN(std::string sum, json_string(j, "checksum", what));
  char* end = nullptr;
  f.checksum = std::strtoull(sum.c_str(), &end, 16);
  if (sum.size() != 16 || end != sum.c_str() + sum.size())
    return Corruption(what + ": checksum of " + f.name + " is not 16 hex digits: '" + sum + "'");
  f.size = static_cast<uint64_t>(size);
  f.data_start = static_cast<uint64_t>(ds);
  f.bytes = static_cast<uint64_t>(bytes);
  return f;
}

// A tensor the file's header must list where the blob layout puts it.
struct Expected {
  std::string name;
  uint64_t offset, nbytes;
};

// Note [store file identity]: the checksums say a file's bytes are the ones written, not which
// layer they are: layer files swapped together with their manifest entries would pass them and
// train on the wrong layers. The header the sharder wrote names its blob ("__metadata__":
// {"streamtune": "layer 7"}) and every tensor at its layout offset, so the header is read back
// and checked against the layout the manifest implies (a few KiB a file, at open).
Status check_header(const SafetensorsFile& st, const std::string& kind, const std::vector<Expected>& want) {
  const std::string& path = st.path();
  auto meta = st.metadata().find("streamtune");
  if (meta == st.metadata().end() || meta->second != kind)
    return Corruption(Str() << path << ": its header says it holds '"
                            << (meta == st.metadata().end() ? std::string("(no streamtune entry)") : meta->second)
                            << "', the manifest lists it as '" << kind << "'");
  for (const Expected& e : want) {
    const TensorInfo* t = st.find(e.name);
    if (t == nullptr) return Corruption(Str() << path << ": its header lacks tensor '" << e.name << "'");
    if (t->offset != e.offset || t->nbytes != e.nbytes)
      return Corruption(Str() << path << ": tensor '" << e.name << "' at bytes [" << t->offset << ", "
                              << t->offset + t->nbytes << "), the layout puts it at [" << e.offset << ", "
                              << e.offset + e.nbytes << ")");
  }
  return Status::OK();
}

Status check_file(const std::string& dir, const StoreFile& f, uint64_t want_bytes, const std::string& kind,
                  const std::vector<Expected>& want) {
  std::string path = path_join(dir, f.name);
  if (f.bytes != want_bytes)
    return Corruption(Str() << path << ": manifest says " << f.bytes << " blob bytes, the layout needs " << want_bytes);
  if (f.data_start % kStoreIoAlign != 0 || f.data_start + f.bytes != f.size)
    return Corruption(Str() << path << ": manifest entry inconsistent (data_start " << f.data_start << ", bytes "
                            << f.bytes << ", size " << f.size << ")");
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return Corruption("store file missing: " + path);
  if (static_cast<uint64_t>(sb.st_size) != f.size)
    return Corruption(Str() << path << ": " << sb.st_size << " bytes on disk, manifest says " << f.size
                            << (static_cast<uint64_t>(sb.st_size) < f.size ? " (truncated)" : ""));
  ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::open(path));  // the header, parsed once
  if (st.data_start() != f.data_start)
    return Corruption(Str() << path << ": safetensors header ends at " << st.data_start()
                            << ", manifest says data_start " << f.data_start);
  return check_header(st, kind, want);
}

}  // namespace

Status verify_store_file(const std::string& dir, const StoreFile& f, const void* data) {
  const uint64_t got = checksum64(data, f.bytes);
  if (got != f.checksum)
    return Corruption(Str() << path_join(dir, f.name) << ": the data does not match its checksum (" << checksum_hex(got)
                            << ", manifest " << checksum_hex(f.checksum) << "): the store is damaged; remove " << dir
                            << " (or run `streamtune shard --force`) and it is rebuilt from the model");
  return Status::OK();
}

std::string layer_file_name(int layer) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "layer_%03d.safetensors", layer);
  return buf;
}

Json manifest_to_json(const StoreManifest& m) {
  Json files = Json::array();
  for (const StoreFile& f : m.layers) files.push_back(file_to_json(f));
  files.push_back(file_to_json(m.extras));
  return Json{{"format", "streamtune-layer-store"},
              {"version", m.version},
              {"source", m.source},
              {"fingerprint", m.fingerprint},
              {"dtype", dtype_name(m.dtype)},
              {"quant", base_quant_name(m.quant)},
              {"num_layers", m.num_layers},
              {"layer_bytes", m.layer_bytes},
              {"extras_bytes", m.extras_bytes},
              {"config", hf_config_to_json(m.config)},
              {"files", files}};
}

StatusOr<StoreManifest> manifest_from_json(const Json& j, const std::string& what) {
  if (!j.is_object()) return Corruption(what + ": not a JSON object");
  StoreManifest m;
  ASSIGN_OR_RETURN(int64_t version, json_int(j, "version", what));
  if (version != kStoreFormatVersion)
    return Corruption(Str() << what << ": store format version " << version << ", this build reads "
                            << kStoreFormatVersion << " (re-run streamtune shard)");
  ASSIGN_OR_RETURN(m.source, json_string(j, "source", what));
  ASSIGN_OR_RETURN(m.fingerprint, json_string(j, "fingerprint", what));
  ASSIGN_OR_RETURN(std::string dt, json_string(j, "dtype", what));
  ASSIGN_OR_RETURN(m.dtype, dtype_from_user(dt), what);
  if (j.contains("quant")) {
    ASSIGN_OR_RETURN(std::string q, json_string(j, "quant", what));
    if (!parse_base_quant(q, &m.quant))
      return Corruption(Str() << what << ": key 'quant': '" << q << "' (expected none, nf4 or code12)");
  }
  if (!j.contains("config")) return Corruption(what + ": missing key 'config'");
  ASSIGN_OR_RETURN(m.config, parse_hf_config(j["config"], what + " (config)"));
  ASSIGN_OR_RETURN(int64_t nl, json_int(j, "num_layers", what));
  ASSIGN_OR_RETURN(int64_t lb, json_int(j, "layer_bytes", what));
  ASSIGN_OR_RETURN(int64_t eb, json_int(j, "extras_bytes", what));
  m.num_layers = static_cast<int>(nl);
  m.layer_bytes = static_cast<uint64_t>(lb);
  m.extras_bytes = static_cast<uint64_t>(eb);
  if (nl != m.config.num_layers)
    return Corruption(Str() << what << ": num_layers " << nl << " but the config has " << m.config.num_layers);
  if (const std::string why = base_layout_error(m.config, m.dtype, m.quant); !why.empty())
    return Corruption(Str() << what << ": " << why);
  uint64_t want_lb = make_layer_layout(m.config, m.dtype, m.quant).bytes;
  uint64_t want_eb = make_extras_layout(m.config, m.dtype).bytes;
  if (m.layer_bytes != want_lb || m.extras_bytes != want_eb)
    return Corruption(Str() << what << ": blob sizes " << m.layer_bytes << "/" << m.extras_bytes
                            << " do not match the layouts " << want_lb << "/" << want_eb);
  if (!j.contains("files") || !j["files"].is_array()) return Corruption(what + ": missing array 'files'");
  const Json& files = j["files"];
  if (files.size() != static_cast<size_t>(nl) + 1)
    return Corruption(Str() << what << ": " << files.size() << " files listed, expected " << nl + 1
                            << " (layers + extras)");
  for (int64_t i = 0; i < nl; ++i) {
    ASSIGN_OR_RETURN(StoreFile f, file_from_json(files[i], what));
    if (f.name != layer_file_name(static_cast<int>(i)))
      return Corruption(Str() << what << ": files[" << i << "] is '" << f.name << "', expected "
                              << layer_file_name(static_cast<int>(i)));
    m.layers.push_back(f);
  }
  ASSIGN_OR_RETURN(m.extras, file_from_json(files[nl], what));
  if (m.extras.name != kExtrasFileName) return Corruption(what + ": last file is not " + kExtrasFileName);
  return m;
}

StatusOr<StoreManifest> open_store_manifest(const std::string& dir) {
  std::string mpath = path_join(dir, kManifestName);
  if (!file_exists(mpath)) return NotFound(dir + " is not a layer store (no " + kManifestName + ")");
  ASSIGN_OR_RETURN(Json j, read_json_file(mpath));
  ASSIGN_OR_RETURN(StoreManifest m, manifest_from_json(j, mpath));
  const LayerLayout layout = make_layer_layout(m.config, m.dtype, m.quant);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    std::vector<Expected> want;
    for (const LayerTensorSpec& s : layout.tensors)
      want.push_back({layer_tensor_name(static_cast<int>(l), s), s.offset, s.nbytes});
    RETURN_IF_ERROR(check_file(dir, m.layers[l], m.layer_bytes, "layer " + std::to_string(l), want), "store " << dir);
  }
  std::vector<Expected> want;
  for (const LayerTensorSpec& s : make_extras_layout(m.config, m.dtype).tensors)
    want.push_back({s.hf_suffix, s.offset, s.nbytes});
  RETURN_IF_ERROR(check_file(dir, m.extras, m.extras_bytes, "extras", want), "store " << dir);
  return m;
}

}  // namespace st
