// Native halves of the redaction detectors, for policies/re2bulk.py (loaded with ctypes,
// which drops the GIL for each call). The system's RE2 (Debian's libre2-dev), not
// google-re2's bundled copy: that one's symbols are not exported.
//
// 1. bulk_*: every match of one pattern in one call (the whole-text passes).
// 2. located_*: a RuleSet built once (secret_rules.py), then per text:
//    - located_scan: the literal search and the located rules' searches around the hits
//      (RuleSet._locate, _scan_regions, _scan_from), the same steps in the same order;
//    - located_walk: a rule found through its core (RuleSet._walk);
//    each judging its matches as RuleSet._judge does, except where the entropy is within
//    1e-9 of the rule's threshold or the rule has allowlists that fire only together: those
//    matches go back to Python, which decides them exactly.
// 3. entropy_*: entropy.find_high_entropy, with the same exception for near ties.
// 4. pii_*: pii.find_pii, leaving IP addresses (which Python's ipaddress judges) to Python.
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

namespace {

RE2::Options make_options(int64_t max_mem, int latin1, int case_sensitive) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(max_mem);
  options.set_case_sensitive(case_sensitive != 0);
  if (latin1) options.set_encoding(RE2::Options::EncodingLatin1);
  return options;
}

// secret_rules: the bounds python writes as None arrive as -1.
constexpr int64_t kNone = -1;
constexpr int64_t kCrowded = 64;   // secret_rules.CROWDED
constexpr int64_t kMinLiteral = 3;  // secret_rules.MIN_LITERAL
constexpr size_t kKeptAlternations = 16;
constexpr double kNearTie = 1e-9;  // entropy.above: closer than this, Python decides

struct Entry {
  int64_t rule, size, before, after, lines_before, lines_after;
};

// secret_rules.Lines: the line ends of one text, found when first asked.
struct Lines {
  const char* data;
  int64_t n;
  std::vector<int64_t> ends;
  bool made = false;

  void index() {
    if (made) return;
    made = true;
    const char* p = data;
    const char* stop = data + n;
    while (p < stop) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(stop - p)));
      if (nl == nullptr) break;
      ends.push_back(nl - data);
      p = nl + 1;
    }
  }
  int64_t start(int64_t at, int64_t lines) {
    if (lines == kNone) return 0;
    index();
    int64_t i = (std::lower_bound(ends.begin(), ends.end(), at) - ends.begin()) - 1 - lines;
    return i >= 0 ? ends[i] + 1 : 0;
  }
  int64_t end(int64_t at, int64_t lines) {
    if (lines == kNone) return n;
    index();
    int64_t i = (std::lower_bound(ends.begin(), ends.end(), at) - ends.begin()) + lines;
    return i < static_cast<int64_t>(ends.size()) ? ends[i] : n;
  }
};

// A match as RuleSet._judge takes it: the whole match, then gitleaks' secret (the first
// capture group that matched something, else the whole match).
struct Quad {
  int64_t ms, me, ss, se;
};

Quad quad_of(const char* data, const std::vector<re2::StringPiece>& sub) {
  Quad q;
  q.ms = sub[0].data() - data;
  q.me = q.ms + static_cast<int64_t>(sub[0].size());
  q.ss = q.ms;
  q.se = q.me;
  for (size_t g = 1; g < sub.size(); ++g) {
    if (sub[g].data() != nullptr && !sub[g].empty()) {
      q.ss = sub[g].data() - data;
      q.se = q.ss + static_cast<int64_t>(sub[g].size());
      break;
    }
  }
  return q;
}

// entropy.entropy's formula; the caller treats a value within kNearTie of a threshold as
// undecided, so rounding apart from Python's never changes a verdict.
double entropy_of(const char* s, int64_t n) {
  if (n <= 0) return 0.0;
  int64_t counts[256] = {0};
  for (int64_t i = 0; i < n; ++i) ++counts[static_cast<uint8_t>(s[i])];
  double sum = 0.0;
  for (int64_t c : counts)
    if (c) sum += static_cast<double>(c) * std::log2(static_cast<double>(c));
  return std::log2(static_cast<double>(n)) - sum / static_cast<double>(n);
}

// secret_rules._Verdicts: the allowlists that apply to one rule, as RE2 Sets by subject.
enum Subject { kSecret = 0, kStop = 1, kMatch = 2, kLine = 3, kSubjects = 4 };

struct Rule {
  std::unique_ptr<RE2> regex;  // located: the rule's regex; null when not run here
  bool open_ended = false;
  std::vector<int64_t> gate;   // keyword literal ids; empty: the gate is implied
  // Walked through its core (RuleSet._walk): the core with its groups.
  std::unique_ptr<RE2> groups;
  int64_t core_before = 0;
  uint8_t in_prefix[256] = {0};
  // The judge.
  double entropy = 0.0;
  bool generic = false;  // gitleaks: a generic-* secret needs a digit
  bool in_python = false;  // allowlists this library does not merge: every match to Python
  std::vector<std::string> patterns[kSubjects];
  std::unique_ptr<RE2::Set> sets[kSubjects];
};

bool set_says(const std::unique_ptr<RE2::Set>& set, const char* s, int64_t n) {
  // A Set whose DFA ran out of memory reports no match: the finding is kept (in doubt, redact).
  return set && set->Match(re2::StringPiece(s, static_cast<size_t>(n)), nullptr);
}

// Appends (rule, decided, ms, me, ss, se): decided 1 is a finding at [ss, se); decided 0
// leaves the match to RuleSet._judge.
struct Judge {
  const char* data;
  int64_t n;
  Lines& lines;
  std::vector<int64_t>& out;
  std::string lowered;  // the secret, lower-cased, for the stopwords
  int64_t seen_lo = -1, seen_hi = -1;
  bool seen_verdict = false;

  void operator()(int64_t index, Rule& rule, const Quad& q) {
    if (q.se <= q.ss) return;
    const char* secret = data + q.ss;
    int64_t len = q.se - q.ss;
    if (rule.in_python) return emit(index, 0, q);
    if (rule.entropy != 0.0) {
      double h = entropy_of(secret, len);
      if (std::fabs(h - rule.entropy) < kNearTie) return emit(index, 0, q);
      if (!(h > rule.entropy)) return;
      if (rule.generic && std::none_of(secret, secret + len, [](char c) { return c >= '0' && c <= '9'; })) return;
    }
    if (set_says(rule.sets[kSecret], secret, len)) return;
    if (rule.sets[kStop]) {
      lowered.assign(secret, static_cast<size_t>(len));
      for (char& c : lowered)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (set_says(rule.sets[kStop], lowered.data(), len)) return;
    }
    if (set_says(rule.sets[kMatch], data + q.ms, q.me - q.ms)) return;
    if (rule.sets[kLine]) {
      int64_t lo = lines.start(q.ss, 0), hi = lines.end(q.se, 0);
      if (lo != seen_lo || hi != seen_hi) {
        seen_lo = lo;
        seen_hi = hi;
        seen_verdict = set_says(rule.sets[kLine], data + lo, hi - lo);
      }
      if (seen_verdict) return;
    }
    emit(index, 1, q);
  }
  void emit(int64_t index, int64_t decided, const Quad& q) { out.insert(out.end(), {index, decided, q.ms, q.me, q.ss, q.se}); }
  void next_rule() { seen_lo = seen_hi = -1; }
};

struct Located {
  int64_t max_mem = 64 << 20;
  std::vector<std::string> literals;  // by id
  std::unordered_map<std::string, int64_t> ids;
  std::vector<std::vector<Entry>> entries;      // folded over the literal's prefixes
  std::vector<std::vector<int64_t>> prefixes;   // literal ids it starts with, itself too
  std::vector<std::vector<int64_t>> located_by;  // rules with a locator on exactly this literal
  std::vector<Rule> rules;
  std::mutex lock;  // guards `alternations`
  std::map<std::vector<uint8_t>, std::shared_ptr<RE2>> alternations;  // left out -> the rest

  // RuleSet._alternation: the literals not left out, longest first (then by bytes), so at
  // each position RE2 reports the longest literal starting there.
  std::shared_ptr<RE2> alternation(const std::vector<uint8_t>& left_out) {
    std::lock_guard<std::mutex> hold(lock);
    auto found = alternations.find(left_out);
    if (found != alternations.end()) return found->second;
    std::vector<const std::string*> order;
    for (size_t i = 0; i < literals.size(); ++i)
      if (!left_out[i]) order.push_back(&literals[i]);
    std::sort(order.begin(), order.end(), [](const std::string* a, const std::string* b) {
      return a->size() != b->size() ? a->size() > b->size() : *a < *b;
    });
    std::string pattern;
    for (const std::string* lit : order) {
      if (!pattern.empty()) pattern += '|';
      pattern += RE2::QuoteMeta(*lit);
    }
    std::shared_ptr<RE2> made;
    if (!order.empty()) {
      made = std::make_shared<RE2>(pattern, make_options(max_mem, 0, 1));
      if (!made->ok()) made.reset();
    }
    if (alternations.size() < kKeptAlternations) alternations[left_out] = made;
    return made;
  }
};

int64_t* released(const std::vector<int64_t>& out, int64_t* size) {
  int64_t* copy = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (out.size() ? out.size() : 1)));
  if (copy == nullptr) return nullptr;
  std::memcpy(copy, out.data(), sizeof(int64_t) * out.size());
  *size = static_cast<int64_t>(out.size());
  return copy;
}

std::unique_ptr<RE2> compiled(const char* pattern, int64_t size, const RE2::Options& options) {
  std::unique_ptr<RE2> re(new RE2(re2::StringPiece(pattern, static_cast<size_t>(size)), options));
  if (!re->ok()) re.reset();
  return re;
}

}  // namespace

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

void bulk_release(int64_t* out) { std::free(out); }

void* located_new(int64_t max_mem, int64_t rules) {
  Located* made = new Located();
  made->max_mem = max_mem;
  made->rules.resize(static_cast<size_t>(rules));
  return made;
}

void located_free(void* handle) { delete static_cast<Located*>(handle); }

// Literals are added first, in id order; then each one's tables.
int64_t located_literal(void* handle, const char* literal, int64_t size) {
  Located* h = static_cast<Located*>(handle);
  int64_t id = static_cast<int64_t>(h->literals.size());
  h->literals.emplace_back(literal, static_cast<size_t>(size));
  h->ids.emplace(h->literals.back(), id);
  h->entries.emplace_back();
  h->prefixes.emplace_back();
  h->located_by.emplace_back();
  return id;
}

// `entries`: six values each (rule, size, before, after, lines_before, lines_after).
void located_tables(void* handle, int64_t id, const int64_t* entries, int64_t n_entries, const int64_t* prefixes, int64_t n_prefixes, const int64_t* located_by, int64_t n_located) {
  Located* h = static_cast<Located*>(handle);
  for (int64_t i = 0; i < n_entries; ++i) {
    const int64_t* e = entries + 6 * i;
    h->entries[id].push_back(Entry{e[0], e[1], e[2], e[3], e[4], e[5]});
  }
  h->prefixes[id].assign(prefixes, prefixes + n_prefixes);
  h->located_by[id].assign(located_by, located_by + n_located);
}

// A located rule: 1 when RE2 compiled its regex with google-re2's options (UTF-8, case-sensitive).
int located_rule(void* handle, int64_t rule, const char* pattern, int64_t size, int open_ended, const int64_t* gate, int64_t n_gate) {
  Located* h = static_cast<Located*>(handle);
  Rule& r = h->rules[rule];
  r.regex = compiled(pattern, size, make_options(h->max_mem, 0, 1));
  r.open_ended = open_ended != 0;
  r.gate.assign(gate, gate + n_gate);
  return r.regex != nullptr;
}

// A rule found through its core: a lazy repeat of the bytes `in_prefix` marks (at most
// `before` of them), then the core, here with its groups. 1 when it compiled.
int located_walker(void* handle, int64_t rule, const char* groups, int64_t groups_size, int64_t before, const uint8_t* in_prefix) {
  Located* h = static_cast<Located*>(handle);
  Rule& r = h->rules[rule];
  r.groups = compiled(groups, groups_size, make_options(h->max_mem, 0, 1));
  r.core_before = before;
  std::memcpy(r.in_prefix, in_prefix, 256);
  return r.groups != nullptr;
}

// The judge of a rule: its entropy threshold (0: none), whether it is a generic-* rule, and
// whether its matches all go to Python. Then its allowlists' patterns, one per call, by subject.
void located_judge(void* handle, int64_t rule, double entropy, int generic, int in_python) {
  Rule& r = static_cast<Located*>(handle)->rules[rule];
  r.entropy = entropy;
  r.generic = generic != 0;
  r.in_python = in_python != 0;
}

void located_allow(void* handle, int64_t rule, int subject, const char* pattern, int64_t size) {
  static_cast<Located*>(handle)->rules[rule].patterns[subject].emplace_back(pattern, static_cast<size_t>(size));
}

// Compiles every rule's allowlist Sets. 1 when all compiled.
int located_ready(void* handle) {
  Located* h = static_cast<Located*>(handle);
  for (Rule& r : h->rules) {
    for (int k = 0; k < kSubjects; ++k) {
      if (r.patterns[k].empty()) continue;
      r.sets[k].reset(new RE2::Set(make_options(h->max_mem, 0, 1), RE2::UNANCHORED));
      for (const std::string& p : r.patterns[k])
        if (r.sets[k]->Add(p, nullptr) < 0) return 0;
      if (!r.sets[k]->Compile()) return 0;
    }
  }
  return 1;
}

// One scan: the literal search over `lowered`, then each located rule whose gate is open
// over `data` around its hits. Returns a malloc'd array:
//   [P, P literal ids present (prefixes included), C, C crowded rule ids,
//    then (rule, decided, match start, match end, secret start, secret end) per kept match]
// and its length in `size`; NULL when an alternation could not be compiled. Free it with
// bulk_release.
int64_t* located_scan(void* handle, const char* data, const char* lowered, int64_t n, int64_t* size) {
  Located* h = static_cast<Located*>(handle);
  const size_t n_lits = h->literals.size(), n_rules = h->rules.size();
  std::vector<uint8_t> left_out(n_lits, 0), present(n_lits, 0), crowded(n_rules, 0);
  std::vector<int64_t> seen(n_lits, 0);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> windows(n_rules);
  Lines lines{data, n};
  size_t live = n_lits;
  std::shared_ptr<RE2> regex = live ? h->alternation(left_out) : nullptr;
  if (live && !regex) return nullptr;
  re2::StringPiece low(lowered, static_cast<size_t>(n)), hit;
  int64_t pos = 0;
  while (regex && pos <= n && regex->Match(low, static_cast<size_t>(pos), static_cast<size_t>(n), RE2::UNANCHORED, &hit, 1)) {
    int64_t s = hit.data() - lowered;
    int64_t len = static_cast<int64_t>(hit.size());
    pos = s + 1;  // literals may overlap: the next one can start inside this one
    auto found = h->ids.find(std::string(hit.data(), hit.size()));
    if (found == h->ids.end()) continue;
    int64_t id = found->second;
    for (int64_t p : h->prefixes[id]) present[p] = 1;
    if (++seen[id] > kCrowded + n / (len >= kMinLiteral ? 256 : 1024)) {
      left_out[id] = 1;
      --live;
      for (int64_t r : h->located_by[id]) {
        crowded[r] = 1;
        windows[r].clear();
      }
      if (!live) break;
      regex = h->alternation(left_out);
      if (!regex) return nullptr;
      pos = s;  // the literals it starts with are still hits at s
      continue;
    }
    for (const Entry& e : h->entries[id]) {
      if (crowded[e.rule]) continue;
      int64_t lo = e.before != kNone ? s - e.before : lines.start(s, e.lines_before);
      int64_t hi = e.after != kNone ? s + e.size + e.after : lines.end(s, e.lines_after);
      windows[e.rule].emplace_back(std::max<int64_t>(lo, 0), std::min(hi, n));
    }
  }

  std::vector<int64_t> out;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < n_lits; ++i)
    if (present[i]) ids.push_back(static_cast<int64_t>(i));
  out.push_back(static_cast<int64_t>(ids.size()));
  out.insert(out.end(), ids.begin(), ids.end());
  ids.clear();
  for (size_t r = 0; r < n_rules; ++r)
    if (crowded[r]) ids.push_back(static_cast<int64_t>(r));
  out.push_back(static_cast<int64_t>(ids.size()));
  out.insert(out.end(), ids.begin(), ids.end());

  Judge judge{data, n, lines, out};
  re2::StringPiece text(data, static_cast<size_t>(n));
  std::vector<re2::StringPiece> sub;
  for (size_t r = 0; r < n_rules; ++r) {
    Rule& rule = h->rules[r];
    std::vector<std::pair<int64_t, int64_t>>& wins = windows[r];
    if (wins.empty() || !rule.regex) continue;
    if (!rule.gate.empty() && std::none_of(rule.gate.begin(), rule.gate.end(), [&](int64_t k) { return present[k] != 0; })) continue;
    judge.next_rule();
    const int64_t index = static_cast<int64_t>(r);
    sub.assign(static_cast<size_t>(rule.regex->NumberOfCapturingGroups()) + 1, re2::StringPiece());
    const int nsub = static_cast<int>(sub.size());
    std::sort(wins.begin(), wins.end());
    if (rule.open_ended) {
      // RuleSet._scan_from: each search from the next window start on, to the end.
      int64_t after = 0, last = -1;
      for (const auto& w : wins) {
        int64_t at = std::max(after, w.first);
        if (at == last) continue;
        last = at;
        if (!rule.regex->Match(text, static_cast<size_t>(at), static_cast<size_t>(n), RE2::UNANCHORED, sub.data(), nsub)) break;
        Quad q = quad_of(data, sub);
        judge(index, rule, q);
        after = q.me > q.ms ? q.me : q.me + 1;
      }
      continue;
    }
    // RuleSet._scan_regions over the merged windows.
    size_t k = 0;
    while (k < wins.size()) {
      int64_t lo = wins[k].first, hi = wins[k].second;
      for (++k; k < wins.size() && wins[k].first <= hi; ++k) hi = std::max(hi, wins[k].second);
      int64_t p = lo;
      while (p <= hi && rule.regex->Match(text, static_cast<size_t>(p), static_cast<size_t>(hi), RE2::UNANCHORED, sub.data(), nsub)) {
        Quad q = quad_of(data, sub);
        judge(index, rule, q);
        p = q.me > q.ms ? q.me : q.me + 1;
      }
    }
  }
  return released(out, size);
}

// RuleSet._walk for one rule found through its core, judged: (rule, decided, ms, me, ss,
// se) per kept match, as located_scan's records. From a position, the rule's leftmost match
// holds the leftmost core match c; its start is the furthest back, at most `before` bytes and
// not before the position, that the bytes before c stay in the prefix's class.
int64_t* located_walk(void* handle, int64_t index, const char* data, int64_t n, int64_t* size) {
  Located* h = static_cast<Located*>(handle);
  Rule& rule = h->rules[index];
  std::vector<int64_t> out;
  if (!rule.groups) return released(out, size);
  re2::StringPiece text(data, static_cast<size_t>(n));
  Lines lines{data, n};
  Judge judge{data, n, lines, out};
  std::vector<re2::StringPiece> sub(static_cast<size_t>(rule.groups->NumberOfCapturingGroups()) + 1);
  const int nsub = static_cast<int>(sub.size());
  int64_t pos = 0;
  while (pos <= n) {
    if (!rule.groups->Match(text, static_cast<size_t>(pos), static_cast<size_t>(n), RE2::UNANCHORED, sub.data(), nsub)) break;
    int64_t c = sub[0].data() - data, e = c + static_cast<int64_t>(sub[0].size());
    int64_t lo = std::max(pos, c - rule.core_before);
    int64_t start = c;
    while (start > lo && rule.in_prefix[static_cast<uint8_t>(data[start - 1])]) --start;
    sub[0] = re2::StringPiece(data + start, static_cast<size_t>(e - start));
    judge(index, rule, quad_of(data, sub));
    pos = e > start ? e : e + 1;
  }
  return released(out, size);
}

// entropy.py's detector: its candidate regex (Latin-1), its hash-label regex, and the
// thresholds by length (hex and base64, `size` entries each, then one value for any longer).
struct Entropy {
  std::unique_ptr<RE2> candidate, hash_label;
  std::vector<double> hex_at, b64_at;
  double hex_beyond, b64_beyond;
};

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

}  // extern "C"

namespace {

bool in_run(uint8_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '_' || c == '-'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_lower(uint8_t c) { return c >= 'a' && c <= 'z'; }
bool is_upper(uint8_t c) { return c >= 'A' && c <= 'Z'; }
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

}  // namespace

extern "C" {

// entropy.find_high_entropy over `data`, `covered` (pairs, sorted, disjoint) the spans a
// higher-ranked detector found. Returns a malloc'd array of (start, end, token end, kind)
// per token: kind 1 hex, 2 base64, 0 undecided (an entropy within 1e-9 of its threshold:
// Python asks is_high_entropy on data[start:token end]). Free it with bulk_release.
int64_t* entropy_find(void* handle, const char* data, int64_t n, const int64_t* covered, int64_t n_covered, int64_t* size) {
  const Entropy& h = *static_cast<Entropy*>(handle);
  re2::StringPiece text(data, static_cast<size_t>(n)), found;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(data);
  std::vector<int64_t> out;
  int64_t pos = 0;
  while (pos < n) {
    if (!h.candidate->Match(text, static_cast<size_t>(pos), static_cast<size_t>(n), RE2::UNANCHORED, &found, 1)) break;
    int64_t s = found.data() - data, e = s + static_cast<int64_t>(found.size());
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

// pii.py's detector: the one-pass pattern, each kind's own regex (in pii._ALONE's order:
// email, iban, credit-card, ipv4, ipv6, phone) and the IBAN lengths by country (26 x 26, 0:
// not listed).
struct Pii {
  std::unique_ptr<RE2> pattern;
  std::unique_ptr<RE2> alone[6];
  uint8_t iban_lengths[26 * 26];
};

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

}  // extern "C"

namespace {

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

// pii.find_pii over `data`: (start, end, kind, decided) per candidate kept, kind as PiiKind;
// decided 0 is an IP address for Python's check. Free it with bulk_release.
int64_t* pii_find(void* handle, const char* data, int64_t n, int64_t* size) {
  const Pii& h = *static_cast<Pii*>(handle);
  re2::StringPiece text(data, static_cast<size_t>(n)), found;
  std::vector<int64_t> out;
  int64_t pos = 0;
  while (pos <= n) {
    if (!h.pattern->Match(text, static_cast<size_t>(pos), static_cast<size_t>(n), RE2::UNANCHORED, &found, 1)) break;
    int64_t s = found.data() - data, e = s + static_cast<int64_t>(found.size());
    pos = e > s ? e : e + 1;
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
  }
  return released(out, size);
}
}
