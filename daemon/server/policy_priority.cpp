#include "server/policy_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <boost/asio/post.hpp>

namespace placementd {

void nice_pool_threads(boost::asio::thread_pool& pool, int threads, int nice) {
  // Shared with the tasks: a task may still be leaving its wait after this function returned.
  struct Rendezvous {
    std::mutex mutex;
    std::condition_variable cv;
    int arrived = 0;
    std::string failure;
  };
  const auto r = std::make_shared<Rendezvous>();
  // Each task holds its thread until every task has run, so no thread runs two of them.
  for (int i = 0; i < threads; ++i)
    boost::asio::post(pool, [r, threads, nice] {
      const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
      const int rc = ::setpriority(PRIO_PROCESS, tid, nice);
      const int error = errno;
      std::unique_lock<std::mutex> lock(r->mutex);
      if (rc != 0 && r->failure.empty())
        r->failure = "cannot nice the policy threads to " + std::to_string(nice) + ": " +
                     std::strerror(error);
      ++r->arrived;
      r->cv.notify_all();
      r->cv.wait(lock, [&] { return r->arrived >= threads; });
    });
  std::unique_lock<std::mutex> lock(r->mutex);
  r->cv.wait(lock, [&] { return r->arrived >= threads; });
  if (!r->failure.empty()) throw std::runtime_error(r->failure);
}

}  // namespace placementd
