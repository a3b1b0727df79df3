#include "server/journal_sink.h"

#include <sys/stat.h>
#include <sys/uio.h>

#include <cinttypes>
#include <cstdio>

#ifdef PLACEMENT_HAVE_SYSTEMD
#include <systemd/sd-journal.h>
#endif

#include "server/job_log.h"

namespace placementd {

namespace {

int syslog_priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    default:
      return 2;
  }
}

}  // namespace

std::vector<std::string> journal_fields(const spdlog::details::log_msg& msg) {
  std::vector<std::string> fields{"MESSAGE=" + std::string(msg.payload.data(), msg.payload.size()),
                                  "PRIORITY=" + std::to_string(syslog_priority(msg.level)),
                                  "SYSLOG_IDENTIFIER=placementd"};
  if (const JobLogScope* job = JobLogScope::current()) {
    fields.push_back("JOB_ID=" + std::to_string(job->id));
    fields.push_back("JOB_NAME=" + job->name);
  }
  return fields;
}

bool is_journal_stream(const char* journal_stream, int fd) {
  if (!journal_stream) return false;
  uintmax_t dev = 0, ino = 0;
  if (std::sscanf(journal_stream, "%ju:%ju", &dev, &ino) != 2) return false;
  struct stat st {};
  return ::fstat(fd, &st) == 0 && static_cast<uintmax_t>(st.st_dev) == dev &&
         static_cast<uintmax_t>(st.st_ino) == ino;
}

bool journal_sink_available() {
#ifdef PLACEMENT_HAVE_SYSTEMD
  return true;
#else
  return false;
#endif
}

void JournalSink::sink_it_(const spdlog::details::log_msg& msg) {
  const std::vector<std::string> fields = journal_fields(msg);
  std::vector<iovec> iov;
  iov.reserve(fields.size());
  for (const std::string& f : fields) iov.push_back({const_cast<char*>(f.data()), f.size()});
#ifdef PLACEMENT_HAVE_SYSTEMD
  if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
#endif
  // No journal to take it (stopped, or not built in): the line still reaches stderr.
  std::fprintf(stderr, "%.*s\n", static_cast<int>(msg.payload.size()), msg.payload.data());
}

}  // namespace placementd
