// sampler: where the candidate's CPU time goes, by the instruction each thread was running.
//
// The op recorder sees only what passes torch's dispatcher, and CtypesWatch only what ctypes
// opens. torch's libraries also run kernels reached by address: a candidate's C++ can walk
// from one of torch's functions back to its library's ELF tables and call the AOTInductor
// shim's aoti_torch_cpu_* functions, which import nothing the symbol check reads and dispatch
// nothing. Wherever the call came from, the work runs in torch's code: so while the candidate
// is timed, each thread is interrupted every interval of its own CPU time, and the handler
// writes down its program counter and id. The harness maps each address to the file it lies in
// afterwards.
//
// Each thread of the process gets a timer on its own CPU clock whose signal goes to it, armed
// when a round starts. A thread that blocks SIGPROF, or starts inside a round, goes unsampled,
// so the harness also reads each thread's CPU time and calls a thread that ran without
// samples a problem, and reads the process's CPU clock, which keeps the time of threads that
// ended inside the round (no per-thread record is left of them); a replaced handler or a disarmed timer shows in `assay_sampler_intact`,
// in the timers found stopped, and in too few samples for the CPU time used.
//
// Built with the op recorder by the verifier (never by the candidate); async-signal-safe: the
// handler only reads its context and an atomic, makes one system call (gettid) and stores into
// fixed arrays.
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

// Non-zero while the forward thread is inside one of the reference's contractions: the op
// recorder (opwatch.cpp, built into the same library) counts it up and down.
std::atomic<int> assay_contraction_depth{0};

namespace {

constexpr long kCapacity = 1 << 17;
unsigned long long pcs[kCapacity];
int tids[kCapacity];
int weights[kCapacity];           // 1 + the expirations merged into this signal: intervals of CPU time
unsigned char scoped[kCapacity];  // 1: taken while a contraction of the reference's ran
std::atomic<long> next_slot{0};
std::atomic<bool> armed{false};
// One CPU-time timer per thread, on that thread's own clock and signalling that thread: a
// process-wide timer's signal goes to whichever thread the kernel picks (measured here: two
// threads with 2.06 s of CPU each got 96 and 483 samples), so shares per thread would be skewed.
constexpr int kThreads = 256;
int timer_tid[kThreads];
timer_t timers[kThreads];
int n_timers = 0;
bool started = false;
long interval_ns = 1000000;

void on_prof(int, siginfo_t* info, void* context) {
  if (!armed.load(std::memory_order_relaxed)) {
    return;
  }
  int weight = 1;
  if (info != nullptr && info->si_code == SI_TIMER && info->si_overrun > 0) {
    weight += info->si_overrun;
  }
  unsigned long long pc = 0;
  const ucontext_t* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  pc = static_cast<unsigned long long>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  pc = static_cast<unsigned long long>(uc->uc_mcontext.pc);
#else
  (void)uc;
#endif
  const long slot = next_slot.fetch_add(1, std::memory_order_relaxed);
  if (slot < kCapacity) {
    pcs[slot] = pc;
    tids[slot] = static_cast<int>(syscall(SYS_gettid));
    weights[slot] = weight;
    scoped[slot] = assay_contraction_depth.load(std::memory_order_relaxed) > 0 ? 1 : 0;
  }
}

}  // namespace

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static int set_timer(timer_t t, long ns) {
  struct itimerspec spec;
  std::memset(&spec, 0, sizeof spec);
  spec.it_value.tv_sec = ns / 1000000000L;
  spec.it_value.tv_nsec = ns % 1000000000L;
  spec.it_interval = spec.it_value;
  return timer_settime(t, 0, &spec, nullptr);
}

// The CPU-time clock of thread `tid` of this process (the kernel's MAKE_THREAD_CPUCLOCK).
static clockid_t thread_clock(int tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 4 | 2);
}

extern "C" {

// Installs the handler. 0 on success.
int assay_sampler_start(long interval_us) {
  if (started) {
    return 0;
  }
  interval_ns = interval_us * 1000L;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, nullptr) != 0) {
    return -1;
  }
  started = true;
  return 0;
}

// Arms a timer for each of the n thread ids in `threads` (made the first time a thread is seen).
// Returns how many threads have no timer (gone already, or past the table's size).
int assay_sampler_arm(const int* threads, int n) {
  if (!started) {
    return n;
  }
  armed.store(true);
  int missing = 0;
  for (int i = 0; i < n; ++i) {
    int k = 0;
    while (k < n_timers && timer_tid[k] != threads[i]) {
      ++k;
    }
    if (k == n_timers) {
      if (n_timers == kThreads) {
        ++missing;
        continue;
      }
      struct sigevent sev;
      std::memset(&sev, 0, sizeof sev);
      sev.sigev_notify = SIGEV_THREAD_ID;
      sev.sigev_signo = SIGPROF;
      sev.sigev_notify_thread_id = threads[i];
      if (timer_create(thread_clock(threads[i]), &sev, &timers[k]) != 0) {
        ++missing;
        continue;
      }
      timer_tid[k] = threads[i];
      ++n_timers;
    }
    if (set_timer(timers[k], interval_ns) != 0) {
      ++missing;
    }
  }
  return missing;
}

// Disarms every timer. Returns how many were found stopped or changed while armed (a timer
// whose thread has ended counts as running: its clock stopped with it).
int assay_sampler_disarm() {
  int stopped = 0;
  for (int k = 0; k < n_timers; ++k) {
    struct itimerspec left;
    std::memset(&left, 0, sizeof left);
    if (timer_gettime(timers[k], &left) == 0) {
      const long every = left.it_interval.tv_sec * 1000000000L + left.it_interval.tv_nsec;
      const bool running = (left.it_value.tv_sec != 0 || left.it_value.tv_nsec != 0) && every == interval_ns;
      if (!running && armed.load()) {
        ++stopped;
      }
    }
    set_timer(timers[k], 0);
  }
  armed.store(false);
  return stopped;
}

// 1 while SIGPROF still goes to on_prof.
int assay_sampler_intact() {
  struct sigaction now;
  if (sigaction(SIGPROF, nullptr, &now) != 0) {
    return 0;
  }
  return (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_prof ? 1 : 0;
}

// Copies the samples since the last take (at most cap) and starts again; call while disarmed.
// Returns how many samples were taken in all (more than cap: the rest were lost).
long assay_sampler_take(unsigned long long* out_pcs, int* out_tids, int* out_weights, unsigned char* out_scoped,
                        long cap) {
  const long n = next_slot.load();
  const long kept = n < kCapacity ? n : kCapacity;
  const long copied = kept < cap ? kept : cap;
  std::memcpy(out_pcs, pcs, sizeof(unsigned long long) * copied);
  std::memcpy(out_tids, tids, sizeof(int) * copied);
  std::memcpy(out_weights, weights, sizeof(int) * copied);
  std::memcpy(out_scoped, scoped, copied);
  next_slot.store(0);
  return n;
}

}  // extern "C"
