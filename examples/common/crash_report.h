#pragma once
// A program that dies of a fatal signal writes which signal and its stack to stderr first. The GPU
// machine (docs/gpu-runs/) has no debugger and keeps nothing after a call, so this line is all a
// crash there leaves behind; stdout, when it goes to a file, may have lost its last rows too.

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace examples::crash_report {

namespace detail {
// The program's name, copied: the report may come while static objects are destroyed.
inline char* program() {
  static char name[64] = "program";
  return name;
}

inline const char* signal_name(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV (segmentation fault)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGFPE:
      return "SIGFPE (arithmetic exception)";
    case SIGILL:
      return "SIGILL (illegal instruction)";
    default:
      return "SIGABRT (aborted)";
  }
}

// Only async-signal-safe calls: write(2), backtrace_symbols_fd (which does not allocate; the first
// backtrace() call, which may, is made before any signal arrives). SA_RESETHAND has restored the
// default action, so the signal raised again, once this returns, ends the process as it would have.
inline void on_fatal_signal(int signal) {
  const char* name = program();
  const char* what = signal_name(signal);
  (void)!::write(STDERR_FILENO, name, std::strlen(name));
  (void)!::write(STDERR_FILENO, ": killed by ", 12);
  (void)!::write(STDERR_FILENO, what, std::strlen(what));
  (void)!::write(STDERR_FILENO, "; its stack:\n", 13);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  ::raise(signal);
}
}  // namespace detail

/// Installs the report for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT under the name `program`.
inline void install(const char* program) {
  std::strncpy(detail::program(), program, 63);
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  // The report runs on a stack of its own: a stack overflow, or a stack pointer gone wrong, leaves
  // none to run it on. (This thread's; another thread's overflow still ends without the report.)
  static char alternate[1 << 16];
  stack_t stack{};
  stack.ss_sp = alternate;
  stack.ss_size = sizeof(alternate);
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = detail::on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_ONSTACK;
  for (const int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(s, &action, nullptr);
}

}  // namespace examples::crash_report
