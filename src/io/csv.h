// CSV / TSV dataset files read as Hugging Face `datasets` reads them (load_dataset("csv"), which
// parses with pandas.read_csv's defaults): a header row names the columns, each later row is one
// record.
//
// Note [CSV as datasets reads it]
// - Fields are separated by the delimiter (',' for .csv, '\t' for .tsv) and records by "\n",
//   "\r\n" or a lone "\r" outside quotes; lines of nothing but spaces and tabs (tabs that are
//   not the delimiter) are skipped.
// - A field that starts with '"' is quoted: it runs to the next '"' not doubled ("" is one '"'),
//   so it may hold delimiters and line breaks; what follows the closing quote up to the next
//   delimiter is kept as written. A '"' inside an unquoted field is an ordinary character.
// - The header's empty names become "Unnamed: i" (i the 0-based column) and repeated names
//   "name.1", "name.2", ... as pandas renames them.
// - An empty field (nothing, or "") and a field missing from a short row are null, as pandas'
//   NaN becomes None in `datasets`; everything else is the string as written. Unlike pandas we
//   keep "NA", "None", "null", ... and numbers as text: a record's fields are prompts and answers,
//   and a response that reads "None" is a response.
// - Refused, naming the file, the line and the column: a row with more fields than the header, a
//   quote still open at the end of the file, a field that is not UTF-8, more than 65,536 columns,
//   a file with no header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/status.h"

namespace st {

constexpr int64_t kCsvMaxColumns = int64_t{1} << 16;

// The delimiter a dataset file's name asks for: '\t' for *.tsv, ',' for *.csv (either possibly
// followed by .gz), 0 for any other name.
char csv_delimiter_for(const std::string& filename);

// Calls fn(record, line) for each record of `text` (line: the 1-based line its row starts on),
// its keys the header's names in column order; stops at the first error or non-OK status from fn.
// `path` names the file in errors ("d.csv line 7: ...").
Status for_each_csv_record(std::string_view text, char delimiter, const std::string& path,
                           const std::function<Status(OrderedJson&&, int64_t)>& fn);

}  // namespace st
