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
// Only what it uses, and a C interface loaded with ctypes: no torch/extension.h, no pybind11
// (34 s, then 13 s, now about 5 s of g++ here), and the build is on the first verification's clock.
#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace {

std::mutex mu;
std::map<std::string, long long> in_window;   // arming thread, while armed
std::map<std::string, long long> foreign;     // any other thread, any time
std::atomic<bool> armed{false};
std::atomic<long long> total{0};
std::atomic<long long> switches{0};           // arm and disarm calls, to match the harness's count
std::atomic<long long> record_off{0};         // arm and disarm calls that found RecordFunction off
std::thread::id owner;
at::CallbackHandle handle = 0;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const bool mine = std::this_thread::get_id() == owner;
  if (mine && !armed.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  const char* name = fn.name();
  std::lock_guard<std::mutex> guard(mu);
  (mine ? in_window : foreign)[name ? name : "?"] += 1;
  total.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void append(std::string& out, char tag, const std::map<std::string, long long>& m) {
  for (const auto& kv : m) {
    out += tag;
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
      at::RecordFunctionCallback(on_start).scopes({at::RecordScope::FUNCTION}));
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

// The counts since the last take, as lines "<w|f><op name>\t<count>\n" (w: the arming thread
// while armed; f: any other thread), into buf. Returns the length written, or minus the length
// needed (clearing nothing) when cap is too small.
long long assay_opwatch_take(char* buf, long long cap) {
  std::lock_guard<std::mutex> guard(mu);
  std::string out;
  append(out, 'w', in_window);
  append(out, 'f', foreign);
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
