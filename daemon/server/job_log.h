#pragma once
// Which job a log line is about: set around a job's work on the thread doing it, read by the
// journald sink for the JOB_ID and JOB_NAME fields (journalctl JOB_NAME=bert).

#include <cstdint>
#include <string>

namespace placementd {

class JobLogScope {
 public:
  /// `name` must outlive the scope (it is the session's own, not copied: a scope is set around
  /// every step report).
  JobLogScope(uint64_t id, const std::string& name);
  ~JobLogScope();
  JobLogScope(const JobLogScope&) = delete;
  JobLogScope& operator=(const JobLogScope&) = delete;

  /// The innermost scope on this thread; null outside any job's work.
  static const JobLogScope* current();

  const uint64_t id;
  const std::string& name;

 private:
  const JobLogScope* const outer_;
};

}  // namespace placementd
