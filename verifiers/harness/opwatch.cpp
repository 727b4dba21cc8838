// opwatch: which aten ops run in a candidate's process, on ANY thread.
//
// A TorchDispatchMode or the profiler only sees ops dispatched on the thread that armed it, so
// a candidate calling at::softmax from a std::thread or an OpenMP region would slip past them.
// A *global* RecordFunction callback runs for every dispatcher call in the process, whatever
// thread makes it and however it was reached (Python, C++, torch.ops, the AOTI C shim).
//
// Built by the verifier from this source (never by the candidate) and loaded read-only.
// The worker arms it around each forward call; ops on the arming thread outside those windows
// are the harness's own (cloning, saving) and are not counted. Ops on any other thread are
// counted at all times, since the harness never starts threads that dispatch ops.
// Only what it uses: torch/extension.h would triple the build (13 s against 34 s here), and the
// build is on the first verification's clock.
#include <ATen/record_function.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace py = pybind11;

namespace {

std::mutex mu;
std::map<std::string, long long> in_window;   // arming thread, while armed
std::map<std::string, long long> foreign;     // any other thread, any time
std::atomic<bool> armed{false};
std::atomic<long long> total{0};
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

py::dict as_dict(const std::map<std::string, long long>& m) {
  py::dict d;
  for (const auto& kv : m) {
    d[py::str(kv.first)] = kv.second;
  }
  return d;
}

}  // namespace

void install() {
  if (handle != 0) {
    return;
  }
  owner = std::this_thread::get_id();
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start).scopes({at::RecordScope::FUNCTION}));
}

bool installed() {
  return handle != 0 && at::hasGlobalCallbacks();
}

void arm() {
  armed.store(true);
}

void disarm() {
  armed.store(false);
}

// (ops on the arming thread while armed, ops on other threads) since the last take().
py::tuple take() {
  std::lock_guard<std::mutex> guard(mu);
  py::tuple out = py::make_tuple(as_dict(in_window), as_dict(foreign));
  in_window.clear();
  foreign.clear();
  return out;
}

long long seen() {
  return total.load();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install", &install);
  m.def("installed", &installed);
  m.def("arm", &arm);
  m.def("disarm", &disarm);
  m.def("take", &take);
  m.def("seen", &seen);
}
