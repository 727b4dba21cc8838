// Native halves of the redaction detectors, for policies/re2bulk.py (loaded with ctypes,
// which drops the GIL for each call). The system's RE2 (Debian's libre2-dev), not
// google-re2's bundled copy: that one's symbols are not exported.
//
// 1. bulk_*: every match of one pattern in one call (the whole-text passes).
// 2. located_*: RuleSet's literal search and its located rules' searches around the hits
//    (secret_rules.RuleSet._locate and _scan_regions / _scan_from), the same steps in the
//    same order, so a dense text costs no Python step per literal hit or per region.
#include <re2/re2.h>

#include <algorithm>
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

struct Entry {
  int64_t rule, size, before, after, lines_before, lines_after;
};

struct Rule {
  std::unique_ptr<RE2> regex;  // null: not a located rule
  bool open_ended = false;
  std::vector<int64_t> gate;   // keyword literal ids; empty: the gate is implied
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

// gitleaks' secret: the first capture group that matched something, else the whole match.
void record(std::vector<int64_t>& out, const char* data, const std::vector<re2::StringPiece>& sub) {
  int64_t ms = sub[0].data() - data, me = ms + static_cast<int64_t>(sub[0].size());
  int64_t ss = ms, se = me;
  for (size_t g = 1; g < sub.size(); ++g) {
    if (sub[g].data() != nullptr && !sub[g].empty()) {
      ss = sub[g].data() - data;
      se = ss + static_cast<int64_t>(sub[g].size());
      break;
    }
  }
  out.insert(out.end(), {ms, me, ss, se});
}

int64_t* released(const std::vector<int64_t>& out, int64_t* size) {
  int64_t* copy = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (out.size() ? out.size() : 1)));
  if (copy == nullptr) return nullptr;
  std::memcpy(copy, out.data(), sizeof(int64_t) * out.size());
  *size = static_cast<int64_t>(out.size());
  return copy;
}

}  // namespace

extern "C" {

// NULL when RE2 rejects the pattern; the caller then keeps to google-re2's live searches.
void* bulk_compile(const char* pattern, int64_t size, int latin1, int64_t max_mem, int case_sensitive) {
  RE2* re = new RE2(re2::StringPiece(pattern, static_cast<size_t>(size)), make_options(max_mem, latin1, case_sensitive));
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

// 1 when RE2 compiled the rule's regex with google-re2's options (UTF-8, case-sensitive).
int located_rule(void* handle, int64_t rule, const char* pattern, int64_t size, int open_ended, const int64_t* gate, int64_t n_gate) {
  Located* h = static_cast<Located*>(handle);
  Rule& r = h->rules[rule];
  r.regex.reset(new RE2(re2::StringPiece(pattern, static_cast<size_t>(size)), make_options(h->max_mem, 0, 1)));
  if (!r.regex->ok()) {
    r.regex.reset();
    return 0;
  }
  r.open_ended = open_ended != 0;
  r.gate.assign(gate, gate + n_gate);
  return 1;
}

// One scan: the literal search over `lowered`, then each located rule whose gate is open
// over `data` around its hits. Returns a malloc'd array:
//   [P, P literal ids present (prefixes included), C, C crowded rule ids,
//    then (rule, match start, match end, secret start, secret end) per match]
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
      pos = s;  // this literal's own prefixes at s are hits still
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

  re2::StringPiece text(data, static_cast<size_t>(n));
  std::vector<re2::StringPiece> sub;
  for (size_t r = 0; r < n_rules; ++r) {
    Rule& rule = h->rules[r];
    std::vector<std::pair<int64_t, int64_t>>& wins = windows[r];
    if (wins.empty() || !rule.regex) continue;
    if (!rule.gate.empty() && std::none_of(rule.gate.begin(), rule.gate.end(), [&](int64_t k) { return present[k] != 0; })) continue;
    sub.assign(static_cast<size_t>(rule.regex->NumberOfCapturingGroups()) + 1, re2::StringPiece());
    const int nsub = static_cast<int>(sub.size());
    std::sort(wins.begin(), wins.end());
    if (rule.open_ended) {
      // RuleSet._scan_from: each search from the next window start on, to the end.
      int64_t at_pos = 0, last = -1;
      for (const auto& w : wins) {
        int64_t at = std::max(at_pos, w.first);
        if (at == last) continue;
        last = at;
        if (!rule.regex->Match(text, static_cast<size_t>(at), static_cast<size_t>(n), RE2::UNANCHORED, sub.data(), nsub)) break;
        out.push_back(static_cast<int64_t>(r));
        record(out, data, sub);
        int64_t ms = sub[0].data() - data, me = ms + static_cast<int64_t>(sub[0].size());
        at_pos = me > ms ? me : me + 1;
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
        out.push_back(static_cast<int64_t>(r));
        record(out, data, sub);
        int64_t ms = sub[0].data() - data, me = ms + static_cast<int64_t>(sub[0].size());
        p = me > ms ? me : me + 1;
      }
    }
  }
  return released(out, size);
}

// secret_rules.RuleSet._core_matches, whole: a rule that is a lazy repeat of a byte class
// (at most `before` bytes, `in_prefix` saying which bytes) then its core. `core`: the core
// capture-free (a DFA pass), `groups`: the core with its groups. Returns a malloc'd array of
// (match start, match end, secret start, secret end) per match, and its length in `size`.
int64_t* walk_core(void* core, void* groups, const char* data, int64_t n, int64_t before, const uint8_t* in_prefix, int64_t* size) {
  const RE2* core_re = static_cast<const RE2*>(core);
  const RE2* groups_re = static_cast<const RE2*>(groups);
  re2::StringPiece text(data, static_cast<size_t>(n)), found;
  std::vector<re2::StringPiece> sub(static_cast<size_t>(groups_re->NumberOfCapturingGroups()) + 1);
  const int nsub = static_cast<int>(sub.size());
  std::vector<int64_t> out;
  int64_t pos = 0;
  while (pos <= n) {
    if (!core_re->Match(text, static_cast<size_t>(pos), static_cast<size_t>(n), RE2::UNANCHORED, &found, 1)) break;
    int64_t c = found.data() - data, e = c + static_cast<int64_t>(found.size());
    // The match RE2 picks at a start is its most preferred parse there, so also the most
    // preferred of those ending at e: the groups anchored at both ends.
    if (!groups_re->Match(text, static_cast<size_t>(c), static_cast<size_t>(e), RE2::ANCHOR_BOTH, sub.data(), nsub)) {
      if (!groups_re->Match(text, static_cast<size_t>(pos), static_cast<size_t>(n), RE2::UNANCHORED, sub.data(), nsub)) break;
      c = sub[0].data() - data;
      e = c + static_cast<int64_t>(sub[0].size());
    }
    int64_t lo = std::max(pos, c - before);
    int64_t start = c;
    while (start > lo && in_prefix[static_cast<uint8_t>(data[start - 1])]) --start;
    sub[0] = re2::StringPiece(data + start, static_cast<size_t>(e - start));
    record(out, data, sub);
    pos = e > start ? e : e + 1;
  }
  return released(out, size);
}

void bulk_release(int64_t* out) { std::free(out); }
}
