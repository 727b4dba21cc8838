// opwatch: which aten ops run in a candidate's process, on ANY thread.
//
// A TorchDispatchMode or the profiler only sees ops dispatched on the thread that armed it, so
// a candidate calling at::softmax from a std::thread or an OpenMP region would slip past them.
// A *global* RecordFunction callback runs for every dispatcher call in the process, whatever
// thread makes it and however it was reached (Python, C++, torch.ops).
//
// What it cannot see: kernels reached without the dispatcher (the AOTInductor C shim's
// aoti_torch_cpu_* functions, at::native/at::cpu, MKL's sgemm_ exported by libtorch_cpu: the
// symbol check, verifiers/kernel/symbols.py, refuses those), and any thread on which
// RecordFunction was switched off (at::enableRecordFunction(false), Python's
// torch.autograd._enable_record_function(False)): callbacks do not run there at all. The
// forward thread's switch is read at every arm and disarm, and a count of the times it was
// off is kept for the harness's integrity check.
//
// Built by the verifier from this source (never by the candidate) and loaded read-only.
// The worker arms it around each forward call; ops on the arming thread outside those windows
// are the harness's own (cloning, saving) and are not counted. Ops on any other thread are
// counted at all times, since the harness never starts threads that dispatch ops.
//
// Contractions. A candidate may make the reference's own contractions (its convolutions and
// matmuls, named by the harness through assay_opwatch_scopes) and fuse what follows them; the
// verifier then needs to know which contraction, on which shapes, and what ran inside it. So
// each op on the arming thread is tagged: 'w' for an op outside any contraction, 'r' for a
// contraction entered from outside one (a root, recorded with its tensor inputs' sizes), 'n'
// for an op inside one. The harness compares the roots and what ran inside them with the
// reference's own record, made by this same library in the same process before the candidate
// was imported. While a root runs, `assay_contraction_depth` is non-zero: the sampler (sampler.cpp,
// built into this library) marks the samples taken then, on any thread, as the contraction's.
//
// Only what it uses, and a C interface loaded with ctypes: no torch/extension.h, no pybind11
// (34 s, then 13 s, now about 5 s of g++ here), and the build is on the first verification's clock.
#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

// Defined by the sampler (sampler.cpp), whose signal handler reads it.
extern std::atomic<int> assay_contraction_depth;

namespace {

std::mutex mu;
std::map<std::string, long long> in_window;   // arming thread, while armed: "<tag><name>[(<sizes>)]"
std::map<std::string, long long> foreign;     // any other thread, any time
std::set<std::string> scopes;                 // the contractions' op names
std::atomic<bool> armed{false};
std::atomic<long long> total{0};
std::atomic<long long> switches{0};           // arm and disarm calls, to match the harness's count
std::atomic<long long> record_off{0};         // arm and disarm calls that found RecordFunction off
std::thread::id owner;
at::CallbackHandle handle = 0;

// Marks the RecordFunction that opened a contraction, so its end closes it.
struct Opened : at::ObserverContext {};

// "[2,3,4];;[5]": each input's sizes if it is a tensor, empty otherwise (as the profiler's
// input_shapes has them).
std::string sizes_of(const at::RecordFunction& fn) {
  std::string out;
  bool first = true;
  for (const c10::IValue& v : fn.inputs()) {
    if (!first) {
      out += ';';
    }
    first = false;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        continue;
      }
      out += '[';
      bool lead = true;
      for (const auto d : t.sizes()) {
        if (!lead) {
          out += ',';
        }
        lead = false;
        out += std::to_string(d);
      }
      out += ']';
    }
  }
  return out;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const bool mine = std::this_thread::get_id() == owner;
  if (mine && !armed.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  const char* raw = fn.name();
  const std::string name = raw ? raw : "?";
  std::unique_ptr<at::ObserverContext> opened;
  std::lock_guard<std::mutex> guard(mu);
  if (mine) {
    // Only the arming thread opens contractions, so the sampler's counter is this thread's depth.
    const bool inside = assay_contraction_depth.load() > 0;
    const bool scope = scopes.count(name) > 0;
    if (inside) {
      in_window['n' + name] += 1;
    } else if (scope) {
      in_window['r' + name + '(' + sizes_of(fn) + ')'] += 1;  // only a root's sizes are judged
    } else {
      in_window['w' + name] += 1;
    }
    if (scope) {
      assay_contraction_depth.fetch_add(1);
      opened = std::make_unique<Opened>();
    }
  } else {
    foreign["f" + name] += 1;
  }
  total.fetch_add(1, std::memory_order_relaxed);
  return opened;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr) {
    assay_contraction_depth.fetch_sub(1);
  }
}

void append(std::string& out, const std::map<std::string, long long>& m) {
  for (const auto& kv : m) {
    out += kv.first;
    out += '\t';
    out += std::to_string(kv.second);
    out += '\n';
  }
}

}  // namespace

extern "C" {

void assay_opwatch_install() {
  if (handle != 0) {
    return;
  }
  owner = std::this_thread::get_id();
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

// The contractions' op names, one a line. Set before the first arm.
void assay_opwatch_scopes(const char* names) {
  std::lock_guard<std::mutex> guard(mu);
  scopes.clear();
  std::string all = names ? names : "";
  size_t at = 0;
  while (at <= all.size()) {
    size_t end = all.find('\n', at);
    if (end == std::string::npos) {
      end = all.size();
    }
    if (end > at) {
      scopes.insert(all.substr(at, end - at));
    }
    at = end + 1;
  }
}

int assay_opwatch_installed() {
  return handle != 0 && at::hasGlobalCallbacks();
}

// Called on the thread that runs forward: RecordFunction's switch is thread-local, so this
// is where a candidate that turned it off (in __init__, or in forward and not back) shows.
void assay_opwatch_arm() {
  switches.fetch_add(1);
  if (!at::isRecordFunctionEnabled()) {
    record_off.fetch_add(1);
  }
  armed.store(true);
}

void assay_opwatch_disarm() {
  switches.fetch_add(1);
  if (!at::isRecordFunctionEnabled()) {
    record_off.fetch_add(1);
  }
  armed.store(false);
}

long long assay_opwatch_record_off() {
  return record_off.load();
}

long long assay_opwatch_switches() {
  return switches.load();
}

// The counts since the last take, as lines "<tag><op name>[(<sizes>)]\t<count>\n" (w, r, n: the
// arming thread while armed, outside, opening (with sizes), inside a contraction; f: any other
// thread), into buf. Returns the length written, or minus the length
// needed (clearing nothing) when cap is too small.
long long assay_opwatch_take(char* buf, long long cap) {
  std::lock_guard<std::mutex> guard(mu);
  std::string out;
  append(out, in_window);
  append(out, foreign);
  const long long n = static_cast<long long>(out.size());
  if (n > cap) {
    return -n;
  }
  std::memcpy(buf, out.data(), out.size());
  in_window.clear();
  foreign.clear();
  return n;
}

long long assay_opwatch_seen() {
  return total.load();
}

}  // extern "C"
