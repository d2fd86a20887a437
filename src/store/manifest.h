// The layer store's manifest.json, and validation of a store directory against it.
//
// A store directory holds manifest.json + layer_NNN.safetensors (one per decoder layer) +
// extras.safetensors. Each file's data section is exactly one blob in the model/weights.h layout
// (layer blob or extras blob), so a single read of [data_start, data_start + bytes) fills a
// buffer. manifest.json is written last: a directory without it is never a store.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "core/status.h"
#include "io/hf_config.h"
#include "model/weights.h"

namespace st {

constexpr int kStoreFormatVersion = 3;  // 2: a checksum of every file's data section; 3: the config
                                        // states sliding windows explicitly (null = none; an absent
                                        // Mistral key now means HF's default 4096)
constexpr size_t kStoreIoAlign = 4096;  // data sections start here (O_DIRECT-friendly)

struct StoreFile {
  std::string name;         // "layer_007.safetensors" (relative to the store dir)
  uint64_t size = 0;        // whole file, bytes
  uint64_t data_start = 0;  // file offset of the data section (multiple of kStoreIoAlign)
  uint64_t bytes = 0;       // blob bytes (== data section length)
  uint64_t checksum = 0;    // checksum64 of the data section (core/checksum.h)
};

struct StoreManifest {
  int version = kStoreFormatVersion;
  ModelConfig config;
  DType dtype = DType::kBF16;
  BaseQuant quant = BaseQuant::kNone;  // "quant": "nf4" (absent in stores written before NF4: none)
  int num_layers = 0;
  uint64_t layer_bytes = 0;   // make_layer_layout(config, dtype, quant).bytes
  uint64_t extras_bytes = 0;  // make_extras_layout(config, dtype).bytes
  std::string source;         // ModelSource::describe()
  std::string fingerprint;    // source_fingerprint(source files), hex
  std::vector<StoreFile> layers;
  StoreFile extras;
};

std::string layer_file_name(int layer);  // "layer_007.safetensors"
constexpr const char* kExtrasFileName = "extras.safetensors";
constexpr const char* kManifestName = "manifest.json";

Json manifest_to_json(const StoreManifest& m);
// Parses and checks internal consistency (layer count, blob sizes against the layouts the
// config implies). `what` names the file in errors.
StatusOr<StoreManifest> manifest_from_json(const Json& j, const std::string& what);

// Reads dir/manifest.json and checks every file against it: present, size, data_start (the
// safetensors header length agrees) and blob bytes. NotFound if there is no manifest (not a
// store, e.g. an interrupted shard); Corruption naming the file on any mismatch or truncation.
StatusOr<StoreManifest> open_store_manifest(const std::string& dir);

// Checks `data` (f.bytes just read from f's data section) against f.checksum. Corruption naming
// the file and how to rebuild the store otherwise. The stores verify each file on its first read
// (the RAM store when it fills, the disk store on a layer's first load): sizes are checked at open,
// contents cannot be without reading everything, and a flipped bit would otherwise train silently
// on damaged weights.
Status verify_store_file(const std::string& dir, const StoreFile& f, const void* data);

}  // namespace st
