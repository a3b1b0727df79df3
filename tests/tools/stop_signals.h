#pragma once
// The test tools hold what they made until they are told to stop: SIGTERM and SIGINT are blocked
// from the start, so a signal sent while they set up waits for the sigwait that ends them.

#include <pthread.h>
#include <signal.h>

namespace placement::testing {

/// Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts); returns the set to
/// sigwait() on.
inline sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace placement::testing
