// libFuzzer target: one frame as a client (or a daemon, for the SDK) sends it. The bytes are a
// 16-byte header and a CBOR payload; the header's type picks the message decoder that the daemon's
// handler (or the SDK) runs on the payload. The decoders' contract (messages.h): a malformed
// message throws placement::FormatError and nothing else, since the daemon logs any other
// exception as its own fault, at error level, for every such frame.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "fuzz_context.h"
#include "placement/inspection.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "placement/serialization.h"

namespace {

using namespace placement;
using protocol::MessageType;

void decode_as(MessageType type, const nlohmann::json& body) {
  switch (type) {
    case MessageType::kHello:
      messages::Hello::from_json(body);
      break;
    case MessageType::kWelcome:
      messages::Welcome::from_json(body);
      break;
    case MessageType::kError:
      messages::Error::from_json(body);
      break;
    case MessageType::kAttach:
      messages::Attach::from_json(body);
      break;
    case MessageType::kAttached:
      messages::Attached::from_json(body);
      break;
    case MessageType::kGraphUpload: {
      const messages::GraphUpload upload = messages::GraphUpload::from_json(body, fuzz::devices());
      // What the session checks next (LiveSession::on_graph): std::invalid_argument names the
      // fault.
      try {
        upload.graph.validate();
      } catch (const std::invalid_argument&) {
      }
      break;
    }
    case MessageType::kGraphAccepted:
      messages::GraphAccepted::from_json(body);
      break;
    case MessageType::kPlacementDirective:
      messages::Directive::from_json(body, fuzz::graph(), fuzz::devices());
      break;
    case MessageType::kStepReport:
      messages::StepReport::from_json(body);
      break;
    case MessageType::kDetached:
      messages::Detached::from_json(body);
      break;
    case MessageType::kProfileReport:
      messages::ProfileReport::from_json(body);
      break;
    case MessageType::kStatusReply:
      messages::StatusReply::from_json(body);
      break;
    case MessageType::kListJobs:
      messages::ListJobs::from_json(body);
      break;
    case MessageType::kJobList:
      messages::JobList::from_json(body);
      break;
    case MessageType::kPluginList:
      messages::PluginList::from_json(body);
      break;
    case MessageType::kJobShow:
      messages::JobShow::from_json(body);
      break;
    case MessageType::kJobInfo:
      messages::JobInfo::from_json(body);
      break;
    case MessageType::kReloaded:
      messages::Reloaded::from_json(body);
      break;
    default:
      break;  // requests without a body: placement_request, detach, status, list_plugins, reload
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < protocol::kHeaderSize) return 0;
  protocol::Header header;
  if (!protocol::decode_header(data, &header) || !protocol::is_known_type(header.type)) return 0;
  nlohmann::json body;
  try {
    body = protocol::decode_payload(data + protocol::kHeaderSize, size - protocol::kHeaderSize);
  } catch (const FormatError&) {
    return 0;
  }
  // What the daemon decodes of it: the message's own keys only, each value whole, which must be
  // the whole document's entries under those keys (a finding otherwise).
  if (const auto keys = messages::keys_read(static_cast<MessageType>(header.type))) {
    const uint8_t* payload = data + protocol::kHeaderSize;
    const size_t length = size - protocol::kHeaderSize;
    const nlohmann::json kept =
        protocol::decode_payload(payload, length, protocol::weigh_payload(payload, length), &*keys);
    nlohmann::json expected = body;
    if (body.is_object()) {
      expected = nlohmann::json::object();
      for (const auto& item : body.items())
        if (std::find(keys->begin(), keys->end(), item.key()) != keys->end())
          expected[item.key()] = item.value();
    }
    // Compared as text: NaN is unequal to itself, and strings need not be UTF-8.
    const auto text = [](const nlohmann::json& j) {
      return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    if (text(kept) != text(expected)) __builtin_trap();
  }
  try {
    decode_as(static_cast<MessageType>(header.type), body);
  } catch (const FormatError&) {
  }
  return 0;
}
