#include "io/csv.h"

#include <optional>
#include <set>
#include <vector>

#include "core/utf8.h"

namespace st {
namespace {

// One row's fields: nullopt for an empty one (Note [CSV as datasets reads it]).
using Fields = std::vector<std::optional<std::string>>;

// Reads records from text, tracking the line number of each record's first line.
class CsvScanner {
 public:
  CsvScanner(std::string_view text, char delim, const std::string& path) : t_(text), delim_(delim), path_(path) {}

  // The next non-empty row into *out (its first line in *line); false at the end of the text.
  StatusOr<bool> next(Fields* out, int64_t* line) {
    while (pos_ < t_.size() && blank_line()) skip_line();
    if (pos_ >= t_.size()) return false;
    out->clear();
    *line = line_;
    for (;;) {
      std::string f;
      if (t_[pos_] == '"') {
        const int64_t open_line = line_;
        ++pos_;
        for (;;) {
          if (pos_ >= t_.size())
            return Corruption(Str() << path_ << " line " << open_line << ": column " << out->size() + 1
                                    << ": a quoted field opened here is never closed");
          const char c = t_[pos_];
          if (c == '"') {
            if (pos_ + 1 < t_.size() && t_[pos_ + 1] == '"') {
              f += '"';
              pos_ += 2;
              continue;
            }
            ++pos_;
            break;
          }
          if (c == '\n' || (c == '\r' && !(pos_ + 1 < t_.size() && t_[pos_ + 1] == '\n'))) ++line_;
          f += c;
          ++pos_;
        }
      }
      const size_t start = pos_;
      while (pos_ < t_.size() && t_[pos_] != delim_ && !is_break(t_[pos_])) ++pos_;
      f.append(t_.data() + start, pos_ - start);
      const bool any = !f.empty();
      if (any && !valid_utf8(f))
        return Corruption(Str() << path_ << " line " << line_ << ": column " << out->size() + 1 << ": not valid UTF-8");
      if (static_cast<int64_t>(out->size()) >= kCsvMaxColumns)
        return InvalidArgument(Str() << path_ << " line " << *line << ": more than " << kCsvMaxColumns << " columns");
      out->push_back(any ? std::optional<std::string>(std::move(f)) : std::nullopt);
      if (pos_ >= t_.size()) return true;
      if (t_[pos_] == delim_) {
        ++pos_;
        if (pos_ >= t_.size() || is_break(t_[pos_])) {  // a trailing delimiter: one more empty field
          out->push_back(std::nullopt);
          if (pos_ < t_.size()) skip_break();
          return true;
        }
        continue;
      }
      skip_break();
      return true;
    }
  }

 private:
  static bool is_break(char c) { return c == '\n' || c == '\r'; }
  // pandas skips a line of nothing but spaces and tabs (a tab that is not the delimiter).
  bool blank_line() const {
    size_t i = pos_;
    while (i < t_.size() && (t_[i] == ' ' || t_[i] == '\t') && t_[i] != delim_) ++i;
    return i >= t_.size() || is_break(t_[i]);
  }
  void skip_line() {
    while (pos_ < t_.size() && !is_break(t_[pos_])) ++pos_;
    if (pos_ < t_.size()) skip_break();
  }
  void skip_break() {
    if (t_[pos_] == '\r' && pos_ + 1 < t_.size() && t_[pos_ + 1] == '\n') ++pos_;
    ++pos_;
    ++line_;
  }

  std::string_view t_;
  char delim_;
  const std::string& path_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

}  // namespace

char csv_delimiter_for(const std::string& filename) {
  std::string name = filename;
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  if (name.ends_with(".tsv")) return '\t';
  if (name.ends_with(".csv")) return ',';
  return 0;
}

Status for_each_csv_record(std::string_view text, char delimiter, const std::string& path,
                           const std::function<Status(OrderedJson&&, int64_t)>& fn) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark (Excel's "CSV UTF-8")
  CsvScanner scan(text, delimiter, path);
  Fields row;
  int64_t line = 0;
  ASSIGN_OR_RETURN(bool any, scan.next(&row, &line));
  if (!any) return InvalidArgument(Str() << path << ": no header row (an empty CSV file)");
  // pandas' names: "Unnamed: i" for an empty one, "name.k" for the k-th repeat.
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < row.size(); ++i) {
    std::string base = row[i] ? *row[i] : Str() << "Unnamed: " << i;
    std::string name = base;
    for (int k = 1; seen.count(name); ++k) name = Str() << base << "." << k;
    seen.insert(name);
    names.push_back(std::move(name));
  }
  for (;;) {
    ASSIGN_OR_RETURN(bool more, scan.next(&row, &line));
    if (!more) return Status::OK();
    if (row.size() > names.size())
      return InvalidArgument(Str() << path << " line " << line << ": " << row.size() << " fields, but the header names "
                                   << names.size() << " columns");
    OrderedJson rec = OrderedJson::object();
    for (size_t i = 0; i < names.size(); ++i) {
      if (i < row.size() && row[i]) rec[names[i]] = std::move(*row[i]);
      else rec[names[i]] = nullptr;
    }
    RETURN_IF_ERROR(fn(std::move(rec), line));
  }
}

}  // namespace st
