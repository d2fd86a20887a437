#include "store/range_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "store/manifest.h"

namespace st {
namespace {

class FileReader : public RangeReader {
 public:
  explicit FileReader(IoMode mode) : mode_(mode) {}

  Status read(const std::string& path, uint64_t offset, size_t len, void* dst) override {
    if (mode_ == IoMode::kDirect) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      if (fd >= 0) {
        int err = 0;
        StatusOr<size_t> got = read_fd(fd, offset, len, round_up_io(len), dst, path, &err);
        ::close(fd);
        // EINVAL: the filesystem takes O_DIRECT at open but not for this read; retry buffered.
        if (err != EINVAL) return finish(got, len, path);
      }
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("opening store file " + path);
    int err = 0;
    StatusOr<size_t> got = read_fd(fd, offset, len, len, dst, path, &err);
    ::close(fd);
    return finish(got, len, path);
  }

 private:
  static Status finish(const StatusOr<size_t>& got, size_t len, const std::string& path) {
    if (!got.ok()) return got.status();
    if (*got < len)
      return Corruption(Str() << path << ": truncated (read " << *got << " of " << len << " bytes)");
    return Status::OK();
  }

  // Reads until `need` bytes (asking for up to `cap`) or EOF; returns the count. *err = errno.
  static StatusOr<size_t> read_fd(int fd, uint64_t offset, size_t need, size_t cap, void* dst,
                                  const std::string& path, int* err) {
    size_t done = 0;
    char* p = static_cast<char*>(dst);
    while (done < need) {
      ssize_t r = ::pread(fd, p + done, cap - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) *err = errno;
      if (r < 0) return ErrnoError(Str() << "reading store file " << path << " at offset " << offset + done);
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

  IoMode mode_;
};

}  // namespace

uint64_t round_up_io(uint64_t v) { return (v + kStoreIoAlign - 1) / kStoreIoAlign * kStoreIoAlign; }

std::unique_ptr<RangeReader> make_file_reader(IoMode mode) { return std::make_unique<FileReader>(mode); }

}  // namespace st
