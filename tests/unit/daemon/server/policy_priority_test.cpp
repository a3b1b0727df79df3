// Policy threads are niced, every one of them, and nothing else in the process is.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <map>

#include "daemon_process.h"
#include "server/policy_priority.h"

namespace placementd {
namespace {

using placement::testing::threads_by_nice;

TEST(PolicyPriority, EveryPoolThreadIsNicedAndNoOtherThread) {
  // The calling thread's own priority, not a count of the threads at 0: a sanitizer's runtime
  // starts threads of its own.
  const int before = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
  boost::asio::thread_pool pool(3);
  nice_pool_threads(pool, 3, 7);
  std::map<int, int> after = threads_by_nice(::getpid());
  EXPECT_EQ(after[7], 3) << "the pool's three threads, and no other";
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())), before)
      << "the calling thread keeps its priority";
  pool.join();
}

}  // namespace
}  // namespace placementd
