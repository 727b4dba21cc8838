// The whole-text passes (policies/re2bulk.py's Bulk): every match of one pattern in one call.
#include "re2bulk.h"

using namespace re2bulk;

extern "C" {

// NULL when RE2 rejects the pattern; the caller then keeps to google-re2's live searches.
void* bulk_compile(const char* pattern, int64_t size, int latin1, int64_t max_mem, int case_sensitive) {
  return compiled(pattern, size, make_options(max_mem, latin1, case_sensitive)).release();
}

void bulk_free(void* re) { delete static_cast<RE2*>(re); }

// The leftmost, non-overlapping matches in data[pos:end] (the whole text as context, as
// google-re2's Match with pos and endpos), the next search starting where a match ends (one
// past an empty one): up to `cap` of them as (start, end) pairs in `out`. Returns how many.
int64_t bulk_spans(void* handle, const char* data, int64_t size, int64_t pos, int64_t end, int64_t* out, int64_t cap) {
  int64_t found = 0;
  if (cap <= 0) return found;
  each_match(*static_cast<const RE2*>(handle), re2::StringPiece(data, static_cast<size_t>(size)), pos, end, [&](int64_t s, int64_t e) {
    out[2 * found] = s;
    out[2 * found + 1] = e;
    return ++found < cap;
  });
  return found;
}

void bulk_release(int64_t* out) { std::free(out); }
}
