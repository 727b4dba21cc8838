// A RuleSet built once (secret_rules.py, re2native.Located), then per text:
// - located_scan: the literal search and the located rules' searches around the hits
//   (RuleSet._locate, _scan_regions, _scan_from), the same steps in the same order;
// - located_walk: a rule found through its core (RuleSet._walk);
// each judging its matches as RuleSet._judge does, except where the entropy is within 1e-9 of
// the rule's threshold or the rule has allowlists that fire only together: those matches go
// back to Python, which decides them exactly.
#include "re2bulk.h"

using namespace re2bulk;

namespace {

// secret_rules: the bounds python writes as None arrive as -1.
constexpr int64_t kNone = -1;
constexpr size_t kKeptAlternations = 16;

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
  // secret_rules' CROWDED, MIN_LITERAL and CROWDED_BYTES: when a literal is left out.
  int64_t crowded = 0, min_literal = 0, bytes_per_hit = 1, bytes_per_short_hit = 1;
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

}  // namespace

extern "C" {

void* located_new(int64_t max_mem, int64_t rules, int64_t crowded, int64_t min_literal, int64_t bytes_per_hit, int64_t bytes_per_short_hit) {
  Located* made = new Located();
  made->max_mem = max_mem;
  made->crowded = crowded;
  made->min_literal = min_literal;
  made->bytes_per_hit = bytes_per_hit;
  made->bytes_per_short_hit = bytes_per_short_hit;
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
    if (++seen[id] > h->crowded + n / (len >= h->min_literal ? h->bytes_per_hit : h->bytes_per_short_hit)) {
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
  auto listed = [&out](const std::vector<uint8_t>& flags) {  // how many are set, then which
    out.push_back(std::count(flags.begin(), flags.end(), 1));
    for (size_t i = 0; i < flags.size(); ++i)
      if (flags[i]) out.push_back(static_cast<int64_t>(i));
  };
  listed(present);
  listed(crowded);

  Judge judge{data, lines, out};
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
  Judge judge{data, lines, out};
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
}
