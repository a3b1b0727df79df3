#include "placement/protocol.h"

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placement::protocol {

namespace {

struct TypeName {
  MessageType type;
  const char* name;
};

constexpr TypeName kTypeNames[] = {
    {MessageType::kHello, "hello"},
    {MessageType::kWelcome, "welcome"},
    {MessageType::kError, "error"},
    {MessageType::kAttach, "attach"},
    {MessageType::kAttached, "attached"},
    {MessageType::kGraphUpload, "graph_upload"},
    {MessageType::kGraphAccepted, "graph_accepted"},
    {MessageType::kPlacementRequest, "placement_request"},
    {MessageType::kPlacementDirective, "placement_directive"},
    {MessageType::kStepReport, "step_report"},
    {MessageType::kDetach, "detach"},
    {MessageType::kDetached, "detached"},
    {MessageType::kStatus, "status"},
    {MessageType::kStatusReply, "status_reply"},
    {MessageType::kListJobs, "list_jobs"},
    {MessageType::kJobList, "job_list"},
    {MessageType::kListPlugins, "list_plugins"},
    {MessageType::kPluginList, "plugin_list"},
    {MessageType::kJobShow, "job_show"},
    {MessageType::kJobInfo, "job_info"},
    {MessageType::kReload, "reload"},
    {MessageType::kReloaded, "reloaded"},
};

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

std::string to_string(MessageType type) {
  for (const TypeName& t : kTypeNames)
    if (t.type == type) return t.name;
  return "unknown(" + std::to_string(static_cast<unsigned>(type)) + ")";
}

bool is_known_type(uint16_t type) {
  for (const TypeName& t : kTypeNames)
    if (static_cast<uint16_t>(t.type) == type) return true;
  return false;
}

std::array<uint8_t, kHeaderSize> encode_header(const Header& header) {
  std::array<uint8_t, kHeaderSize> out{};
  for (size_t i = 0; i < kMagic.size(); ++i) out[i] = kMagic[i];
  put16(&out[4], header.version);
  put16(&out[6], header.type);
  put32(&out[8], header.length);
  put32(&out[12], header.request_id);
  return out;
}

bool decode_header(const uint8_t* bytes, Header* header) {
  for (size_t i = 0; i < kMagic.size(); ++i)
    if (bytes[i] != kMagic[i]) return false;
  header->version = get16(bytes + 4);
  header->type = get16(bytes + 6);
  header->length = get32(bytes + 8);
  header->request_id = get32(bytes + 12);
  return true;
}

std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id, const nlohmann::json& body,
                                  uint16_t version) {
  std::vector<uint8_t> payload = nlohmann::json::to_cbor(body);
  Header header{version, static_cast<uint16_t>(type), static_cast<uint32_t>(payload.size()),
                request_id};
  const auto head = encode_header(header);
  std::vector<uint8_t> frame;
  frame.reserve(kHeaderSize + payload.size());
  frame.insert(frame.end(), head.begin(), head.end());
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

nlohmann::json decode_payload(const uint8_t* bytes, size_t size) {
  try {
    return nlohmann::json::from_cbor(bytes, bytes + size);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("payload is not valid CBOR: ") + e.what());
  }
}

nlohmann::json error_body(const std::string& code, const std::string& message, bool fatal) {
  return {{"code", code}, {"message", message}, {"fatal", fatal}};
}

}  // namespace placement::protocol
