#pragma once
// Logging straight to journald (sd_journal_send) when the daemon's stderr is the journal, so that
// a job's lines carry JOB_ID and JOB_NAME fields (job_log.h) besides the message and priority.
// Elsewhere placementd logs plain lines to stderr.

#include <mutex>
#include <string>
#include <vector>

#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/base_sink.h>

namespace placementd {

/// The journal fields of one line: MESSAGE, PRIORITY (syslog's), SYSLOG_IDENTIFIER, and JOB_ID
/// and JOB_NAME inside a JobLogScope.
std::vector<std::string> journal_fields(const spdlog::details::log_msg& msg);

/// Whether `fd` is the stream systemd connected to the journal: JOURNAL_STREAM ("DEV:INODE",
/// `journal_stream`) names its device and inode. Null or not matching: no.
bool is_journal_stream(const char* journal_stream, int fd);

/// True when built with libsystemd (sd_journal_sendv); without it there is no journal sink.
bool journal_sink_available();

class JournalSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}
};

}  // namespace placementd
