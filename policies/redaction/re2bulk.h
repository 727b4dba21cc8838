// What the native halves of the redaction detectors share (re2bulk.cpp, re2rules.cpp,
// re2detectors.cpp, built into one library by policies/re2bulk.py and loaded with ctypes,
// which drops the GIL for each call). The system's RE2 (Debian's libre2-dev), not
// google-re2's bundled copy: that one's symbols are not exported.
#pragma once

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace re2bulk {

inline RE2::Options make_options(int64_t max_mem, int latin1, int case_sensitive) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(max_mem);
  options.set_case_sensitive(case_sensitive != 0);
  if (latin1) options.set_encoding(RE2::Options::EncodingLatin1);
  return options;
}

inline std::unique_ptr<RE2> compiled(const char* pattern, int64_t size, const RE2::Options& options) {
  std::unique_ptr<RE2> re(new RE2(re2::StringPiece(pattern, static_cast<size_t>(size)), options));
  if (!re->ok()) re.reset();
  return re;
}

// A malloc'd copy of `out` for Python (freed with bulk_release), its length in `size`.
inline int64_t* released(const std::vector<int64_t>& out, int64_t* size) {
  int64_t* copy = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (out.size() ? out.size() : 1)));
  if (copy == nullptr) return nullptr;
  std::memcpy(copy, out.data(), sizeof(int64_t) * out.size());
  *size = static_cast<int64_t>(out.size());
  return copy;
}

constexpr double kNearTie = 1e-9;  // entropy.above: closer than this, Python decides

// entropy.entropy's formula; a caller treats a value within kNearTie of a threshold as
// undecided, so rounding apart from Python's never changes a verdict.
inline double entropy_of(const char* s, int64_t n) {
  if (n <= 0) return 0.0;
  int64_t counts[256] = {0};
  for (int64_t i = 0; i < n; ++i) ++counts[static_cast<uint8_t>(s[i])];
  double sum = 0.0;
  for (int64_t c : counts)
    if (c) sum += static_cast<double>(c) * std::log2(static_cast<double>(c));
  return std::log2(static_cast<double>(n)) - sum / static_cast<double>(n);
}

// The leftmost, non-overlapping matches of `re` in text[pos:end] (the whole text as context,
// as google-re2's Match with pos and endpos), each next search starting where a match ends
// (one past an empty one), as each(start, end); it returns false to stop. The loop of every
// whole-text pass, as re2util.match_spans writes it in Python.
template <typename Each>
void each_match(const RE2& re, re2::StringPiece text, int64_t pos, int64_t end, Each each) {
  re2::StringPiece found;
  while (pos <= end && re.Match(text, static_cast<size_t>(pos), static_cast<size_t>(end), RE2::UNANCHORED, &found, 1)) {
    int64_t s = found.data() - text.data();
    int64_t e = s + static_cast<int64_t>(found.size());
    if (!each(s, e)) return;
    pos = e > s ? e : e + 1;
  }
}

inline bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
inline bool is_lower(uint8_t c) { return c >= 'a' && c <= 'z'; }
inline bool is_upper(uint8_t c) { return c >= 'A' && c <= 'Z'; }

}  // namespace re2bulk
