// entropy.find_high_entropy and pii.find_pii, whole (re2native.Entropy, re2native.Pii): an
// entropy within 1e-9 of its threshold, and IP addresses (which Python's ipaddress judges), are
// left to Python.
#include "re2bulk.h"

using namespace re2bulk;

namespace {

// entropy.py's detector: its candidate regex (Latin-1), its hash-label regex, and the
// thresholds by length (hex and base64, `size` entries each, then one value for any longer).
struct Entropy {
  std::unique_ptr<RE2> candidate, hash_label;
  std::vector<double> hex_at, b64_at;
  double hex_beyond, b64_beyond;
};

// re2bulk.Cursor: the leftmost match from `pos` (which never decreases) out of a listed
// run of leftmost, non-overlapping matches from 0; a position inside a listed match gets a
// live search. Without a list, every answer is a live search.
struct Listed {
  const RE2* regex;
  re2::StringPiece text;
  const int64_t* spans;
  int64_t pairs;
  int64_t i = 0;  // the first listed match not yet passed

  bool operator()(int64_t pos, int64_t* s, int64_t* e) {
    if (spans != nullptr) {
      while (i < pairs && spans[2 * i] < pos) ++i;
      int64_t after = 0;  // where the search for match i began
      if (i > 0) after = spans[2 * i - 1] > spans[2 * i - 2] ? spans[2 * i - 1] : spans[2 * i - 1] + 1;
      if (pos >= after) {
        if (i >= pairs) return false;
        *s = spans[2 * i];
        *e = spans[2 * i + 1];
        return true;
      }
    }
    re2::StringPiece found;
    if (!regex->Match(text, static_cast<size_t>(pos), text.size(), RE2::UNANCHORED, &found, 1)) return false;
    *s = found.data() - text.data();
    *e = *s + static_cast<int64_t>(found.size());
    return true;
  }
};

bool in_run(uint8_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '_' || c == '-'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

enum Verdict { kUndecided = 0, kHex = 1, kBase64 = 2, kNot = 3 };

// entropy.is_high_entropy on data[s:e] (`before`: the up to 24 bytes before it).
Verdict judge_token(const Entropy& h, const char* data, int64_t s, int64_t e) {
  const uint8_t* body = reinterpret_cast<const uint8_t*>(data + s);
  int64_t n = e - s;
  while (n > 0 && body[n - 1] == '=') --n;
  auto decide = [](double value, double threshold, Verdict kind) {
    if (std::fabs(value - threshold) < kNearTie) return kUndecided;
    return value >= threshold ? kind : kNot;
  };
  if (n >= 32 && std::all_of(body, body + n, is_hex)) {
    int64_t digits = std::count_if(body, body + n, is_digit);
    if (digits == 0 || digits == n) return kNot;  // needs both digits and letters
    int64_t lo = std::max<int64_t>(0, s - 24);
    if (h.hash_label->Match(re2::StringPiece(data + lo, static_cast<size_t>(s - lo)), 0, static_cast<size_t>(s - lo), RE2::UNANCHORED, nullptr, 0)) return kNot;
    double threshold = n < static_cast<int64_t>(h.hex_at.size()) ? h.hex_at[n] : h.hex_beyond;
    return decide(entropy_of(data + s, n), threshold, kHex);
  }
  if (n < 20) return kNot;
  if (std::none_of(body, body + n, is_upper) || std::none_of(body, body + n, is_lower)) return kNot;
  if (std::none_of(body, body + n, is_digit)) return kNot;
  // A path or URL is words between slashes; random base64 almost never has two or more
  // segments in plain lower case.
  if (std::find(body, body + n, '/') != body + n) {
    int64_t segments = 0, wordy = 0, start = 0;
    for (int64_t i = 0; i <= n; ++i) {
      if (i < n && body[i] != '/') continue;
      ++segments;
      const uint8_t* seg = body + start;
      int64_t len = i - start;
      // bytes.islower() and isalnum(): letters and digits only, a lower-case letter, no upper
      if (len >= 2 && std::all_of(seg, seg + len, [](uint8_t c) { return is_digit(c) || is_lower(c) || is_upper(c); }) && std::any_of(seg, seg + len, is_lower) &&
          std::none_of(seg, seg + len, is_upper))
        ++wordy;
      start = i + 1;
    }
    if (wordy >= std::max<int64_t>(2, segments / 2)) return kNot;
  }
  double threshold = n < static_cast<int64_t>(h.b64_at.size()) ? h.b64_at[n] : h.b64_beyond;
  return decide(entropy_of(data + s, n), threshold, kBase64);
}

// pii.py's detector: the one-pass pattern, each kind's own regex (in pii._ALONE's order:
// email, iban, credit-card, ipv4, ipv6, phone) and the IBAN lengths by country (26 x 26, 0:
// not listed).
struct Pii {
  std::unique_ptr<RE2> pattern;
  std::unique_ptr<RE2> alone[6];
  uint8_t iban_lengths[26 * 26];
};

enum PiiKind { kEmail = 0, kIban = 1, kCard = 2, kIpv4 = 3, kIpv6 = 4, kPhone = 5, kNoKind = 6 };

// pii._POSSIBLE: bytes a kind's match must hold; only ever skips a kind.
bool possible(int kind, const uint8_t* span, int64_t n) {
  switch (kind) {
    case kEmail: return std::find(span, span + n, '@') != span + n;
    case kIban: return span[0] >= 'A' && span[0] <= 'Z';
    case kCard: return span[0] >= '2' && span[0] <= '6';
    case kIpv4: return std::find(span, span + n, '.') != span + n;
    case kIpv6: return std::find(span, span + n, ':') != span + n;
    default: return true;
  }
}

// pii._kind_of: the first alternative that matches exactly [s, e) alone, in the same text.
int kind_of(const Pii& h, const char* data, int64_t n, int64_t s, int64_t e) {
  const uint8_t* span = reinterpret_cast<const uint8_t*>(data + s);
  if (e > s && std::all_of(span, span + (e - s), is_digit)) return kCard;
  re2::StringPiece text(data, static_cast<size_t>(n)), m;
  for (int k = 0; k < 6; ++k) {
    if (e <= s || !possible(k, span, e - s)) continue;
    if (h.alone[k]->Match(text, static_cast<size_t>(s), static_cast<size_t>(n), RE2::ANCHOR_START, &m, 1) && m.data() - data == s && static_cast<int64_t>(m.size()) == e - s) return k;
  }
  return kNoKind;
}

// pii.card_ok
bool card_ok(const uint8_t* c, int64_t n) {
  std::string digits;
  bool space = false, dash = false;
  for (int64_t i = 0; i < n; ++i) {
    if (c[i] == ' ') space = true;
    else if (c[i] == '-') dash = true;
    else digits += static_cast<char>(c[i]);
  }
  if (digits.size() < 13 || digits.size() > 19) return false;
  if (std::all_of(digits.begin(), digits.end(), [&](char d) { return d == digits[0]; })) return false;
  if (space && dash) return false;  // mixed separators are not a card layout
  int total = 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    int d = digits[digits.size() - 1 - i] - '0';
    if (i % 2) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    total += d;
  }
  return total % 10 == 0;
}

// pii.iban_ok: the match holds only A-Z, 0-9 and spaces.
bool iban_ok(const Pii& h, const uint8_t* c, int64_t n) {
  std::string iban;
  for (int64_t i = 0; i < n; ++i)
    if (c[i] != ' ') iban += static_cast<char>(c[i]);
  if (iban.size() < 4) return false;
  int expected = 0;
  if (iban[0] >= 'A' && iban[0] <= 'Z' && iban[1] >= 'A' && iban[1] <= 'Z') expected = h.iban_lengths[(iban[0] - 'A') * 26 + (iban[1] - 'A')];
  if (expected && static_cast<int>(iban.size()) != expected) return false;
  if (!expected && (iban.size() < 15 || iban.size() > 34)) return false;
  std::string rearranged = iban.substr(4) + iban.substr(0, 4);
  int r = 0;
  for (char ch : rearranged) {
    if (ch >= '0' && ch <= '9') r = (r * 10 + (ch - '0')) % 97;
    else if (ch >= 'A' && ch <= 'Z') r = (r * 100 + (ch - 'A' + 10)) % 97;
    else return false;
  }
  return r == 1;
}

}  // namespace

extern "C" {

void* entropy_new(const char* candidate, int64_t candidate_size, const char* hash_label, int64_t hash_size, const double* hex_at, const double* b64_at, int64_t size, double hex_beyond, double b64_beyond, int64_t max_mem) {
  std::unique_ptr<Entropy> h(new Entropy());
  h->candidate = compiled(candidate, candidate_size, make_options(max_mem, 1, 1));
  h->hash_label = compiled(hash_label, hash_size, make_options(max_mem, 0, 1));
  if (!h->candidate || !h->hash_label) return nullptr;
  h->hex_at.assign(hex_at, hex_at + size);
  h->b64_at.assign(b64_at, b64_at + size);
  h->hex_beyond = hex_beyond;
  h->b64_beyond = b64_beyond;
  return h.release();
}

void entropy_free(void* handle) { delete static_cast<Entropy*>(handle); }

// The candidate regex's leftmost, non-overlapping matches over `data` (a pass for the worker),
// as (start, end) pairs. Free it with bulk_release.
int64_t* entropy_candidates(void* handle, const char* data, int64_t n, int64_t* size) {
  std::vector<int64_t> out;
  each_match(*static_cast<Entropy*>(handle)->candidate, re2::StringPiece(data, static_cast<size_t>(n)), 0, n, [&](int64_t s, int64_t e) {
    out.insert(out.end(), {s, e});
    return true;
  });
  return released(out, size);
}

// entropy.find_high_entropy over `data`, `covered` (pairs, sorted, disjoint) the spans a
// higher-ranked detector found. Returns a malloc'd array of (start, end, token end, kind)
// per token: kind 1 hex, 2 base64, 0 undecided (an entropy within 1e-9 of its threshold:
// Python asks is_high_entropy on data[start:token end]). Free it with bulk_release.
// `listed`: the candidate regex's matches over `data` from entropy_candidates (pairs, run
// ahead), or NULL to search here.
int64_t* entropy_find(void* handle, const char* data, int64_t n, const int64_t* covered, int64_t n_covered, const int64_t* listed, int64_t n_listed, int64_t* size) {
  const Entropy& h = *static_cast<Entropy*>(handle);
  re2::StringPiece text(data, static_cast<size_t>(n)), found;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(data);
  std::vector<int64_t> out;
  Listed next{h.candidate.get(), text, listed, n_listed};
  int64_t pos = 0;
  while (pos < n) {
    int64_t s, e;
    if (!next(pos, &s, &e)) break;
    pos = e;
    if (!in_run(bytes[s])) ++s;  // the byte before the run
    if (e < n && in_run(bytes[e])) {
      // A 32-hex-digit start of a longer run that is not all hex: no check would accept it.
      int64_t end = e;
      while (end < n && in_run(bytes[end])) ++end;
      pos = end;
      continue;
    }
    int64_t end = e;
    while (end < n && end < e + 2 && bytes[end] == '=') ++end;  // '=' padding belongs to the token
    if (n_covered) {
      // The last covered span starting at or before s.
      int64_t lo = 0, hi = n_covered;
      while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (covered[2 * mid] <= s) lo = mid + 1; else hi = mid;
      }
      int64_t i = lo - 1;
      if (i >= 0 && end <= covered[2 * i + 1]) {
        // Inside a covered span: so are the runs after it, up to the run (or '=' padding)
        // the span ends in. Go on from the byte before that last run.
        int64_t b = covered[2 * i + 1];
        if (b > e) {
          int64_t k = b;
          while (k > e && (in_run(bytes[k - 1]) || bytes[k - 1] == '=')) --k;
          pos = k - 1;
        }
        continue;
      }
    }
    Verdict v = judge_token(h, data, s, e);
    if (v != kNot) out.insert(out.end(), {s, e, end, static_cast<int64_t>(v)});
  }
  return released(out, size);
}

void* pii_new(const char* const* patterns, const int64_t* sizes, const uint8_t* iban_lengths, int64_t max_mem) {
  std::unique_ptr<Pii> h(new Pii());
  h->pattern = compiled(patterns[0], sizes[0], make_options(max_mem, 0, 1));
  if (!h->pattern) return nullptr;
  for (int k = 0; k < 6; ++k) {
    h->alone[k] = compiled(patterns[k + 1], sizes[k + 1], make_options(max_mem, 0, 1));
    if (!h->alone[k]) return nullptr;
  }
  std::memcpy(h->iban_lengths, iban_lengths, sizeof(h->iban_lengths));
  return h.release();
}

void pii_free(void* handle) { delete static_cast<Pii*>(handle); }

// pii.find_pii over `data`: (start, end, kind, decided) per candidate kept, kind as PiiKind;
// decided 0 is an IP address for Python's check. Free it with bulk_release.
int64_t* pii_find(void* handle, const char* data, int64_t n, int64_t* size) {
  const Pii& h = *static_cast<Pii*>(handle);
  std::vector<int64_t> out;
  each_match(*h.pattern, re2::StringPiece(data, static_cast<size_t>(n)), 0, n, [&](int64_t s, int64_t e) {
    int kind = kind_of(h, data, n, s, e);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(data + s);
    bool keep = false, decided = true;
    switch (kind) {
      case kEmail: keep = true; break;
      case kIban: keep = iban_ok(h, c, e - s); break;
      case kCard: keep = card_ok(c, e - s); break;
      case kIpv4:
      case kIpv6: keep = true; decided = false; break;
      case kPhone: {
        int64_t digits = std::count_if(c, c + (e - s), is_digit);
        keep = digits >= 7 && digits <= 15;
        break;
      }
      default: break;
    }
    if (keep) out.insert(out.end(), {s, e, static_cast<int64_t>(kind), static_cast<int64_t>(decided)});
    return true;
  });
  return released(out, size);
}
}
