// Ctrl-C as a request to stop training cleanly: while a SigintStop is alive, the first SIGINT
// only sets a flag (the trainer finishes its step, writes a checkpoint and returns) and says so on
// stderr; a second one gets the default action (the process dies with status 130, the last
// checkpoint intact). The previous handler comes back when it goes. One at a time.
#pragma once

#include <csignal>

namespace st {

class SigintStop {
 public:
  SigintStop();
  ~SigintStop();
  SigintStop(const SigintStop&) = delete;
  SigintStop& operator=(const SigintStop&) = delete;

  // True once a SIGINT arrived while this scope was alive.
  static bool requested();

 private:
  struct sigaction old_ {};
};

}  // namespace st
