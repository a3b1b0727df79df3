#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "server/job_log.h"
#include "server/journal_sink.h"

namespace placementd {
namespace {

spdlog::details::log_msg line(spdlog::level::level_enum level, const char* text) {
  return spdlog::details::log_msg("placementd", level, text);
}

bool has(const std::vector<std::string>& fields, const std::string& field) {
  return std::find(fields.begin(), fields.end(), field) != fields.end();
}

TEST(JournalSink, AJobsLinesCarryItsIdAndNameAndOthersDoNot) {
  const auto plain = journal_fields(line(spdlog::level::warn, "reload refused"));
  EXPECT_TRUE(has(plain, "MESSAGE=reload refused"));
  EXPECT_TRUE(has(plain, "PRIORITY=4"));
  EXPECT_TRUE(has(plain, "SYSLOG_IDENTIFIER=placementd"));
  EXPECT_EQ(plain.size(), 3u);
  {
    const std::string bert = "bert large", gnmt = "gnmt";
    const JobLogScope job(7, bert);
    const auto fields = journal_fields(line(spdlog::level::info, "job 7 'bert large' attached"));
    EXPECT_TRUE(has(fields, "JOB_ID=7"));
    EXPECT_TRUE(has(fields, "JOB_NAME=bert large"));
    EXPECT_TRUE(has(fields, "PRIORITY=6"));
    {
      const JobLogScope inner(8, gnmt);
      EXPECT_TRUE(has(journal_fields(line(spdlog::level::err, "x")), "JOB_ID=8"));
    }
    EXPECT_TRUE(has(journal_fields(line(spdlog::level::debug, "x")), "JOB_ID=7"));
    EXPECT_TRUE(has(journal_fields(line(spdlog::level::debug, "x")), "PRIORITY=7"));
  }
  EXPECT_EQ(JobLogScope::current(), nullptr);
  EXPECT_TRUE(has(journal_fields(line(spdlog::level::critical, "x")), "PRIORITY=2"));
}

TEST(JournalSink, StderrIsTheJournalOnlyWhenJournalStreamNamesItsDeviceAndInode) {
  char path[] = "/tmp/journal_stream_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  EXPECT_TRUE(is_journal_stream(mine.c_str(), fd));
  EXPECT_FALSE(is_journal_stream(other.c_str(), fd))
      << "a journal stream inherited by a child whose stderr moved";
  EXPECT_FALSE(is_journal_stream(nullptr, fd));
  EXPECT_FALSE(is_journal_stream("garbage", fd));
  ::close(fd);
  ::unlink(path);
}

}  // namespace
}  // namespace placementd
