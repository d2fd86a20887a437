// Test driver for tools/ref/parquet_fuzz.py: prints every row streamtune's Parquet reader gives
// for each file named on the command line, so a script can diff them against pyarrow.
// Output per file: "FILE <path>", then one "ROW <json>" line per row (via for_each_row), then
// "GROUPS <json array of row counts>" from read_row_group (a second decoding path, to catch
// per-group state leaking between groups), then "OK" or "ERR <status>".
// Build: see build_driver() in parquet_fuzz.py (links BUILD/libst_{io,core}.a and the codecs).
#include <cstdio>
#include <string>
#include <vector>

#include "io/parquet.h"

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    std::printf("FILE %s\n", argv[a]);
    auto f = st::ParquetFile::open(argv[a]);
    if (!f.ok()) {
      std::printf("ERR %s\n", f.status().to_string().c_str());
      continue;
    }
    st::Status s = f->for_each_row([](const st::OrderedJson& row, int64_t) {
      // replace: never throw on bad UTF-8 here; the diff will show the replacement characters.
      std::printf("ROW %s\n", row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return st::Status::OK();
    });
    if (s.ok()) {
      std::string groups = "[";
      for (int g = 0; g < f->num_row_groups() && s.ok(); ++g) {
        std::vector<st::OrderedJson> rows;
        s = f->read_row_group(g, &rows);
        groups += (g ? "," : "") + std::to_string(rows.size());
      }
      if (s.ok()) std::printf("GROUPS %s]\n", groups.c_str());
    }
    if (s.ok()) std::printf("OK\n");
    else std::printf("ERR %s\n", s.to_string().c_str());
    std::fflush(stdout);
  }
  return 0;
}
