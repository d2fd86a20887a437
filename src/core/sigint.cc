#include "core/sigint.h"

#include <unistd.h>

#include <atomic>

namespace st {
namespace {

std::atomic<int> g_sigints{0};

extern "C" void on_sigint(int) {
  if (g_sigints.fetch_add(1) >= 1) {
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  const char msg[] = "\nSIGINT: finishing the current step, then saving a checkpoint (Ctrl-C again to abort)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
}

}  // namespace

SigintStop::SigintStop() {
  g_sigints = 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_);
}

SigintStop::~SigintStop() { sigaction(SIGINT, &old_, nullptr); }

bool SigintStop::requested() { return g_sigints.load() > 0; }

}  // namespace st
