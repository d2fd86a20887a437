#include "core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace st {

StatusOr<std::string> read_file_to_string(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(Str() << path << ": no such file");
    return ErrnoError("opening " + path);
  }
  // Pipes stay readable (tokenize --text-file <(...)); an endless device (/dev/zero) stops here.
  constexpr size_t kMaxBytes = size_t{1} << 30;
  constexpr size_t kChunk = size_t{1} << 20;
  std::string out;
  size_t used = 0;
  for (;;) {
    if (used > kMaxBytes) {
      ::close(fd);
      return InvalidArgument(Str() << path << ": larger than " << (kMaxBytes >> 20) << " MiB, not a file this reads whole");
    }
    if (out.size() < used + kChunk) out.resize(std::max(out.size() * 2, used + kChunk));
    ssize_t n = ::read(fd, out.data() + used, kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoError("reading " + path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(used);
  return out;
}

Status write_file_atomic(const std::string& path, std::string_view data) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("creating " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoError("writing " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Status s = ErrnoError("flushing " + tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoError("renaming " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::OK();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status make_dirs(const std::string& path) {
  if (path.empty() || is_directory(path)) return Status::OK();
  std::string parent = path_dirname(path);
  if (!parent.empty() && parent != path) RETURN_IF_ERROR(make_dirs(parent));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("creating directory " + path);
  return Status::OK();
}

std::string path_join(const std::string& a, const std::string& b) {
  if (a.empty() || (!b.empty() && b[0] == '/')) return b;
  return a.back() == '/' ? a + b : a + "/" + b;
}

std::string path_dirname(const std::string& p) {
  auto pos = p.find_last_of('/');
  if (pos == std::string::npos) return "";
  if (pos == 0) return "/";
  return p.substr(0, pos);
}

bool path_is_within(const std::string& inner, const std::string& outer) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path i = fs::weakly_canonical(fs::absolute(inner, ec), ec).lexically_normal();
  fs::path o = fs::weakly_canonical(fs::absolute(outer, ec), ec).lexically_normal();
  if (!o.empty() && o.filename().empty()) o = o.parent_path();  // "dir/" -> "dir"
  auto [oi, ii] = std::mismatch(o.begin(), o.end(), i.begin(), i.end());
  return oi == o.end();
}

std::string path_basename(const std::string& p) {
  auto pos = p.find_last_of('/');
  return pos == std::string::npos ? p : p.substr(pos + 1);
}

MappedFile::~MappedFile() {
  if (data_ && size_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_), path_(std::move(o.path_)) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ && size_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever (session 23 audit); it
  // changes nothing for a regular file, and anything else is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(Str() << path << ": no such file");
    return ErrnoError("opening " + path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = ErrnoError("stat " + path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {  // a directory, device or FIFO has no size to map (/dev/zero read as empty)
    ::close(fd);
    return InvalidArgument(Str() << path << ": not a regular file");
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Status s = ErrnoError("mmap " + path);
      ::close(fd);
      m.size_ = 0;
      return s;
    }
    m.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

}  // namespace st
