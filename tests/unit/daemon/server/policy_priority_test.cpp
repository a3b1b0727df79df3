// Policy threads are niced, every one of them, and nothing else in the process is.
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>

#include "daemon_process.h"
#include "server/policy_priority.h"

namespace placementd {
namespace {

using placement::testing::threads_by_nice;

TEST(PolicyPriority, EveryPoolThreadIsNicedAndNoOtherThread) {
  const int before = threads_by_nice(::getpid())[0];
  boost::asio::thread_pool pool(3);
  nice_pool_threads(pool, 3, 7);
  std::map<int, int> after = threads_by_nice(::getpid());
  EXPECT_EQ(after[7], 3);
  EXPECT_EQ(after[0], before) << "the calling thread keeps its priority";
  pool.join();
}

}  // namespace
}  // namespace placementd
