#pragma once
// The table of request handlers: for each message type, who may send it and the thread it runs
// on. The dispatcher (Service::handle) enforces both before a handler runs, so a handler holds only
// what the message does.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"
#include "server/connection_state.h"

namespace placementd {

/// Who may send a message; checked on the I/O thread before the handler runs.
enum class Access {
  kHandshake,   // only as a connection's first frame (hello)
  kAnyone,      // any peer, after hello
  kUnattached,  // a connection not yet attached as a job
  kAttached,    // a connection attached as a job
  kAdmin,       // uid 0 or a member of [daemon].admin_group
};

/// Where a handler runs.
enum class Runs {
  /// Inline on the I/O thread: quick work, and the only place a handler may change the connection.
  kIoThread,
  /// On the attached job's strand, after the messages the job sent before (Access::kAttached).
  kJobStrand,
  /// On a policy thread, for work that may wait on a job's lock: the connection's own job's strand
  /// if it is attached (so a job sees its earlier reports counted), else any policy thread.
  kPolicyThread,
};

/// One request as a handler sees it; a copy of what the connection knew when the frame came, so a
/// handler off the I/O thread never touches the connection.
struct Request {
  placement::protocol::MessageType type;
  uint32_t id = 0;
  nlohmann::json body;
  Responder respond;
  Peer peer;
  uint16_t version = 0;
  /// The connection's job (null when not attached).
  std::shared_ptr<AttachedJob> job;
};

/// Runs on the I/O thread with the connection it may change.
using IoHandler = std::function<void(ConnectionState&, Request&)>;
/// Runs off the I/O thread.
using WorkHandler = std::function<void(Request&)>;

/// How one message type is handled. What a handler throws becomes the request's error frame: a
/// RequestError with its code, a placement::FormatError as bad_payload, anything else as internal.
struct Route {
  Access access = Access::kAnyone;
  Runs runs = Runs::kIoThread;
  /// What the request does, for error messages ("uploading a graph").
  std::string doing;
  /// The lowest protocol version the message exists in.
  uint16_t min_version = placement::protocol::kMinVersion;
  /// The connection is no longer attached once this message is taken (detach).
  bool ends_attachment = false;
  IoHandler on_io;
  WorkHandler work;

  Route needs_version(uint16_t version) const;
  Route ending_attachment() const;
};

Route on_io_thread(Access access, std::string doing, IoHandler handler);
/// Access::kAttached is implied: only an attached connection has a job strand.
Route on_job_strand(std::string doing, WorkHandler handler);
Route on_policy_thread(Access access, std::string doing, WorkHandler handler);

class HandlerTable {
 public:
  /// Registers the handler of `type`. A second handler for one type, a reply type, or a route
  /// whose handler does not fit where it runs is a programming error: std::logic_error.
  void add(placement::protocol::MessageType type, Route route);
  /// Null for a type nothing handles (replies).
  const Route* find(placement::protocol::MessageType type) const;
  std::vector<placement::protocol::MessageType> types() const;

 private:
  std::map<placement::protocol::MessageType, Route> routes_;
};

}  // namespace placementd
