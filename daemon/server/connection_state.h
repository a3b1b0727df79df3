#pragma once
// What the server knows of one connection, and how a handler answers on it. Shared by the socket
// code (server.cpp), the dispatcher (service.h) and the handlers.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "placement/messages.h"
#include "placement/protocol.h"
#include "server/uid_backlog.h"

namespace placementd {

struct AttachedJob;

/// Who is on the other end of a connection (from SO_PEERCRED).
struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  /// uid 0 or a member of [daemon].admin_group.
  bool admin = false;
};

/// Requests of one connection handed to its job's strand or the policy pool and not done yet. At
/// kMaxInFlight the server reads nothing more from the connection (the client's socket and its own
/// bounded queue fill, not the daemon's memory: a step report in flight holds about 1 KiB, and a
/// client sending them faster than its session takes them once held gigabytes), and it reads again
/// once they are down to kResumeAt. A job's reports during a policy step of seconds fit: they wait
/// in the socket and the SDK's queue. What they weigh decoded counts in the user's backlog.
struct InFlight {
  static constexpr uint32_t kMaxInFlight = 256;
  static constexpr uint32_t kResumeAt = kMaxInFlight / 2;
  std::atomic<uint32_t> count{0};
  /// Set by the server: reads again if it stopped (any thread; it posts to the I/O thread).
  std::function<void()> resume;
  /// The connection's uid's, shared by its connections (set by the server; null in unit tests).
  std::shared_ptr<UidBacklog> backlog;
  /// One request weighing `bytes` handed over.
  void add(uint64_t bytes) {
    count.fetch_add(1);
    if (backlog) backlog->add(bytes);
  }
  /// That request done: calls resume when the count falls to kResumeAt.
  void done(uint64_t bytes) {
    if (backlog) backlog->done(bytes);
    if (count.fetch_sub(1) == kResumeAt + 1 && resume) resume();
  }
};

/// Per-connection protocol state, owned by the connection and touched on the I/O thread only
/// (but for `in_flight`, which the handlers' threads count down).
struct ConnectionState {
  Peer peer;
  uint16_t version = 0;  // 0 until Hello
  std::shared_ptr<AttachedJob> job;
  std::shared_ptr<InFlight> in_flight = std::make_shared<InFlight>();
};

/// How a handler answers: type, request id, body, and whether the stream must close afterwards.
/// May be called from any thread; the connection posts it to its I/O thread.
using Responder =
    std::function<void(placement::protocol::MessageType, uint32_t, nlohmann::json, bool)>;

/// Answers request `rid` with an error frame; a `fatal` one also closes the stream.
inline void reply_error(const Responder& respond, uint32_t rid, const char* code,
                        const std::string& message, bool fatal = false) {
  respond(placement::protocol::MessageType::kError, rid,
          placement::messages::Error{code, message, fatal}.to_json(), fatal);
}

}  // namespace placementd
