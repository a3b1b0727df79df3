// The crash report every example and benchmark installs (examples/common/crash_report.h).

#include <gtest/gtest.h>

#include <csignal>

#include "crash_report.h"
#include "daemon_process.h"

namespace {

// The report names the program and the signal, lists the stack, and the process still dies of the
// signal (its status is what a crash's is, for the shell and for scripts/gpu-run.sh).
TEST(CrashReport, AFatalSignalNamesTheProgramAndListsTheStackThenKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        examples::crash_report::install("some_bench");
        std::raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV),
      "some_bench: killed by SIGSEGV \\(segmentation fault\\); its stack:\n.*unit_sdk");
  EXPECT_EXIT(
      {
        examples::crash_report::install("some_bench");
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT), "some_bench: killed by SIGABRT");
}

int deeper(int n) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(n);
  return n == 0 ? frame[0] : deeper(n + 1) + frame[0];
}

// A stack overflow leaves no stack to report on but the report's own.
TEST(CrashReport, AStackOverflowIsReportedToo) {
  if (placement::testing::under_thread_sanitizer())
    GTEST_SKIP() << "ThreadSanitizer handles a fatal signal on its own stack first";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        examples::crash_report::install("some_bench");
        deeper(1);
      },
      ::testing::KilledBySignal(SIGSEGV), "some_bench: killed by SIGSEGV");
}

// Without the report, the same signal ends the process with nothing written: what the report adds.
TEST(CrashReport, WithoutItACrashWritesNothing) {
  if (placement::testing::under_address_sanitizer() || placement::testing::under_thread_sanitizer())
    GTEST_SKIP() << "the sanitizer reports the crash itself";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::raise(SIGSEGV), ::testing::KilledBySignal(SIGSEGV), "^$");
}

}  // namespace
