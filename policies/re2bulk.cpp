// Every match of one pattern in one call, for policies/re2bulk.py (loaded with ctypes, which
// drops the GIL for the call). The system's RE2 (Debian's libre2-dev), not google-re2's
// bundled copy: that one's symbols are not exported.
#include <re2/re2.h>

#include <cstdint>

extern "C" {

// NULL when RE2 rejects the pattern; the caller then keeps to google-re2's live searches.
void* bulk_compile(const char* pattern, int64_t size, int latin1, int64_t max_mem, int case_sensitive) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(max_mem);
  options.set_case_sensitive(case_sensitive != 0);
  if (latin1) options.set_encoding(RE2::Options::EncodingLatin1);
  RE2* re = new RE2(re2::StringPiece(pattern, static_cast<size_t>(size)), options);
  if (!re->ok()) {
    delete re;
    return nullptr;
  }
  return re;
}

void bulk_free(void* re) { delete static_cast<RE2*>(re); }

// The leftmost, non-overlapping matches in data[pos:end] (the whole text as context, as
// google-re2's Match with pos and endpos), the next search starting where a match ends (one
// past an empty one): up to `cap` of them as (start, end) pairs in `out`. Returns how many.
int64_t bulk_spans(void* handle, const char* data, int64_t size, int64_t pos, int64_t end, int64_t* out, int64_t cap) {
  const RE2* re = static_cast<const RE2*>(handle);
  re2::StringPiece text(data, static_cast<size_t>(size));
  re2::StringPiece match;
  int64_t found = 0;
  while (pos <= end && found < cap) {
    if (!re->Match(text, static_cast<size_t>(pos), static_cast<size_t>(end), RE2::UNANCHORED, &match, 1)) break;
    int64_t s = match.data() - data;
    int64_t e = s + static_cast<int64_t>(match.size());
    out[2 * found] = s;
    out[2 * found + 1] = e;
    ++found;
    pos = e > s ? e : e + 1;
  }
  return found;
}
}
