#pragma once
// The Unix-socket front end: accepts connections, frames bytes, hands frames to the Service.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "server/service.h"
#include "server/uid_backlog.h"

namespace placementd {

class Connection;

/// The [daemon] limits the server enforces (defaults in config/config.h).
struct ServerLimits {
  uint32_t max_frame_bytes = placement::protocol::kDefaultMaxFrameBytes;
  int64_t max_connections = kDefaultMaxConnections;
  int64_t max_connections_per_uid = kDefaultMaxConnectionsPerUid;
  int64_t frame_timeout_ms = kDefaultFrameTimeoutMs;
  int64_t idle_timeout_ms = kDefaultIdleTimeoutMs;
  size_t max_queued_bytes = kMaxQueuedReplyBytes;
  std::string admin_group;
  /// Partial frames buffered over all connections, and replies queued over all connections, each
  /// (daemon.max_buffered_bytes).
  size_t max_buffered_bytes = static_cast<size_t>(kDefaultMaxBufferedBytes);
  /// Decoded bytes of one uid's requests waiting for a session or the policy pool
  /// (daemon.max_pending_bytes_per_uid, server/uid_backlog.h).
  uint64_t max_pending_bytes_per_uid = static_cast<uint64_t>(kDefaultMaxPendingBytesPerUid);
  /// [limits]: a graph upload's frame length and what its payload may take to decode (the rest
  /// of [limits] is held where the upload is decoded, Service::handle_payload).
  LimitsConfig graph_limits;
};

/// All I/O runs on one io_context thread; policy work is posted elsewhere by the Service and its
/// replies come back through asio::post. One bad connection never affects another.
class Server {
 public:
  Server(boost::asio::io_context& io, Service& service);
  ~Server();

  /// Creates the socket at `path` with `mode`, replacing a stale file (the caller holds the lock).
  void listen(const std::string& path, uint32_t mode);
  /// Uses an already listening socket (systemd socket activation).
  void adopt(int fd);
  void set_limits(const ServerLimits& limits);
  const ServerLimits& limits() const { return limits_; }

  /// Stops accepting; existing connections continue until close_all().
  void stop_accepting();
  void close_all();

  Service& service() { return service_; }

 private:
  friend class Connection;
  void accept();
  /// Every UidLogLimit window: logs, for each uid, the lines it made that were not logged.
  void summarize_logs();
  void remove(const std::shared_ptr<Connection>& connection);
  /// While the partial frames of all connections are over max_buffered_bytes, closes the largest
  /// holder ("busy") of the uid whose connections hold the most: `crossing`, which went over, only
  /// when it is that.
  void shed_buffers(Connection& crossing);
  /// While the replies queued for all connections are over max_buffered_bytes, closes the
  /// connection with the most unread.
  void shed_replies();
  /// Whether uid/gid administers, when known without asking NSS: root, no admin_group, or an answer
  /// of the last kAdminAnswerSeconds.
  std::optional<bool> known_admin(uid_t uid, gid_t gid) const;
  void remember_admin(uid_t uid, gid_t gid, const std::string& group, bool admin);

  boost::asio::io_context& io_;
  Service& service_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer log_summary_timer_;
  ServerLimits limits_;
  std::set<std::shared_ptr<Connection>> connections_;
  /// Open connections by peer uid.
  std::map<uid_t, int64_t> connections_of_uid_;
  /// What each connected uid's requests hold while they wait (daemon.max_pending_bytes_per_uid).
  std::map<uid_t, std::shared_ptr<UidBacklog>> backlogs_;
  size_t buffered_ = 0;
  /// Bytes of replies queued over all connections, not yet written.
  size_t queued_ = 0;
  bool accepting_ = false;
  /// Admin answers by (uid, gid) for limits_.admin_group, with when they were looked up; I/O thread
  /// only.
  std::map<std::pair<uid_t, gid_t>, std::pair<bool, std::chrono::steady_clock::time_point>>
      admin_answers_;
  /// Where NSS lookups run (getgrnam_r, getgrouplist may wait seconds on LDAP); declared last, so
  /// it is joined before the rest goes.
  boost::asio::thread_pool lookups_{1};
};

}  // namespace placementd
