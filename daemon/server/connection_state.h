#pragma once
// What the server knows of one connection, and how a handler answers on it. Shared by the socket
// code (server.cpp), the dispatcher (service.h) and the handlers.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "placement/messages.h"
#include "placement/protocol.h"

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

/// Per-connection protocol state, owned by the connection and touched on the I/O thread only.
struct ConnectionState {
  Peer peer;
  uint16_t version = 0;  // 0 until Hello
  std::shared_ptr<AttachedJob> job;
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
