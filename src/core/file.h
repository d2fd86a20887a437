// Small file helpers. Writes are atomic: data goes to "path.tmp.<pid>", is fsync'd, then
// renamed over `path`, so a crash never leaves a half-written file under the final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace st {

StatusOr<std::string> read_file_to_string(const std::string& path);
Status write_file_atomic(const std::string& path, std::string_view data);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
Status make_dirs(const std::string& path);  // mkdir -p
std::string path_join(const std::string& a, const std::string& b);
std::string path_dirname(const std::string& p);
std::string path_basename(const std::string& p);
// Whether `inner` is `outer` or lies under it, after resolving symlinks, "..", and trailing
// slashes (neither path need exist). Guards a replace of `outer` against deleting `inner`.
bool path_is_within(const std::string& inner, const std::string& outer);

// Read-only memory map of a whole file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static StatusOr<MappedFile> open(const std::string& path);
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace st
