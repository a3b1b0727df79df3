#include "placement/protocol.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "placement/serialization.h"

namespace placement::protocol {

namespace {

struct TypeName {
  MessageType type;
  const char* name;
  bool request;  // sent by clients; the others are the daemon's answers
};

constexpr TypeName kTypeNames[] = {
    {MessageType::kHello, "hello", true},
    {MessageType::kWelcome, "welcome", false},
    {MessageType::kError, "error", false},
    {MessageType::kAttach, "attach", true},
    {MessageType::kAttached, "attached", false},
    {MessageType::kGraphUpload, "graph_upload", true},
    {MessageType::kGraphAccepted, "graph_accepted", false},
    {MessageType::kPlacementRequest, "placement_request", true},
    {MessageType::kPlacementDirective, "placement_directive", false},
    {MessageType::kStepReport, "step_report", true},
    {MessageType::kDetach, "detach", true},
    {MessageType::kDetached, "detached", false},
    {MessageType::kProfileReport, "profile_report", true},
    {MessageType::kStatus, "status", true},
    {MessageType::kStatusReply, "status_reply", false},
    {MessageType::kListJobs, "list_jobs", true},
    {MessageType::kJobList, "job_list", false},
    {MessageType::kListPlugins, "list_plugins", true},
    {MessageType::kPluginList, "plugin_list", false},
    {MessageType::kJobShow, "job_show", true},
    {MessageType::kJobInfo, "job_info", false},
    {MessageType::kReload, "reload", true},
    {MessageType::kReloaded, "reloaded", false},
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

// Heap blocks as glibc's malloc hands them out: the request and 8 bytes of header, rounded up to
// 16, at least 32.
uint64_t chunk(uint64_t bytes) { return std::max<uint64_t>(32, (bytes + 8 + 15) & ~uint64_t{15}); }

// What nlohmann::json's CBOR decoder (3.11, json_sax_dom_parser) allocates for each kind of item,
// with libstdc++'s containers. A text string is read into a local buffer by push_back (capacity
// doubling: up to 2L, with the block before it alive while it grows) and then copied into its
// value; a key the same way into its map's reused key buffer, then into the map's node. An
// array's elements are appended one by one: at most twice as many slots as elements, and the
// block before the last growth alive beside it. A byte string is read the same way and moved.
constexpr uint64_t kStringObject = 48;   // new std::string, chunk(32)
constexpr uint64_t kMapObject = 64;      // new std::map, chunk(48)
constexpr uint64_t kMapNode = 96;        // chunk(32 tree links + 32 key + 16 value)
constexpr uint64_t kArrayObject = 64;    // new std::vector, chunk(24), and its first slots' block
constexpr uint64_t kArraySlot = 48;      // 16 bytes a slot, twice over, and the old block's 16
constexpr uint64_t kBinaryObject = 64;   // new byte container, chunk(40)
constexpr uint64_t kDecoderBase = 4096;  // the reader, the parser's stack, an error's message
// Freeing a document: nlohmann::json releases it through a stack of the values still to free,
// each moved there once (16 bytes, and the stack's growth).
constexpr uint64_t kReleaseSlot = 48;

uint64_t text_bytes(uint64_t length) {
  // libstdc++ keeps up to 15 characters in the string itself.
  return length > 15 ? chunk(length + 1) : 0;
}
// The local buffer a text string or key is read into: its last two blocks.
uint64_t read_buffer_bytes(uint64_t length) {
  return length > 15 ? chunk(2 * length + 1) + chunk(length + 1) : 0;
}

// Weighs a payload's CBOR item without recursion or an allocation per item. Stops early (with what
// it has seen) at the first malformed head, once nesting passes `depth_limit`, or at bytes after
// the item: the decoder refuses the payload at that same point and cannot have built more than
// what was weighed before it. A string whose length runs past the payload's end is weighed at the
// bytes that are there, which is what the decoder reads of it before it stops.
PayloadWeight weigh_cbor(const uint8_t* p, size_t size, size_t depth_limit, uint64_t stop_above) {
  struct Open {
    int64_t items;  // items still expected; -1 = indefinite
    int major;      // 4 array, 5 map, 6 tag, 2/3 an indefinite byte/text string
  };
  std::vector<Open> open;
  PayloadWeight w;
  uint64_t largest_buffer = 0;  // read buffers are alive one at a time, but for keys
  size_t pos = 0;
  uint64_t map_items = 0;  // the items read in the innermost open map: even ones are keys
  std::vector<uint64_t> map_items_outer;
  const auto item_done = [&] {
    while (!open.empty() && open.back().items > 0 && --open.back().items == 0) {
      if (open.back().major == 5) {
        map_items = map_items_outer.back();
        map_items_outer.pop_back();
      }
      open.pop_back();
    }
  };
  // What holding one more item costs in its container.
  const auto slot = [&]() -> bool {
    ++w.items;
    w.decoded_bytes += kReleaseSlot;
    if (open.empty()) return false;
    if (open.back().major == 4) w.decoded_bytes += kArraySlot;
    if (open.back().major == 5) return map_items++ % 2 == 0;  // a key
    return false;
  };
  const auto finish = [&] {
    w.decoded_bytes += kDecoderBase + largest_buffer;
    return w;
  };
  while (pos < size) {
    if (w.items > 0 && open.empty()) return finish();
    if (w.decoded_bytes > stop_above) {
      w.whole = false;
      return finish();
    }
    const uint8_t head = p[pos++];
    const int major = head >> 5, info = head & 0x1f;
    uint64_t value = info;
    if (info >= 24 && info <= 27) {
      const size_t n = size_t{1} << (info - 24);
      if (pos + n > size) return finish();
      value = 0;
      for (size_t i = 0; i < n; ++i) value = (value << 8) | p[pos + i];
      pos += n;
    } else if (info >= 28 && info <= 30) {
      return finish();
    }
    const bool indefinite = info == 31;
    if (major == 7 && indefinite) {  // "break": closes the innermost indefinite container
      if (open.empty() || open.back().items != -1) return finish();
      if (open.back().major == 5) {
        map_items = map_items_outer.back();
        map_items_outer.pop_back();
      }
      open.pop_back();
      item_done();
      continue;
    }
    const bool in_indefinite_string =
        !open.empty() && (open.back().major == 2 || open.back().major == 3);
    if ((major == 2 || major == 3) && !indefinite) {
      const uint64_t length = std::min<uint64_t>(value, size - pos);
      if (in_indefinite_string) {
        // A chunk: read like a string of its own and appended to the whole, whose growth holds up
        // to three times its bytes at once, and which is then copied into its value.
        w.decoded_bytes += read_buffer_bytes(length) + 4 * length;
      } else {
        const bool key = slot();
        if (major == 3) {
          w.decoded_bytes += key ? kMapNode + text_bytes(length) + read_buffer_bytes(length)
                                 : kStringObject + text_bytes(length);
          if (!key) largest_buffer = std::max(largest_buffer, read_buffer_bytes(length));
        } else {
          w.decoded_bytes += (key ? kMapNode : 0) + kBinaryObject + chunk(2 * length) + length + 32;
        }
      }
      if (value > size - pos) return finish();
      pos += value;
      item_done();
      continue;
    }
    const bool container =
        major == 4 || major == 5 || major == 6 || ((major == 2 || major == 3) && indefinite);
    if (!container) {
      slot();
      item_done();
      continue;
    }
    if (major != 6) {
      const bool key = slot();
      if (key) w.decoded_bytes += kMapNode;
      w.decoded_bytes += major == 4   ? kArrayObject
                         : major == 5 ? kMapObject
                         : major == 3 ? kStringObject
                                      : kBinaryObject;
    }
    if (!indefinite && major != 6 && value == 0) {  // empty array, map or string
      item_done();
      continue;
    }
    const int64_t items = indefinite   ? -1
                          : major == 6 ? 1
                          : major == 5
                              ? static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX / 2)) * 2
                              : static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX));
    if (major == 5) {
      map_items_outer.push_back(map_items);
      map_items = 0;
    }
    open.push_back({items, major});
    w.depth = std::max(w.depth, open.size());
    if (w.depth > depth_limit) return finish();
  }
  return finish();
}

}  // namespace

std::string to_string(MessageType type) {
  for (const TypeName& t : kTypeNames)
    if (t.type == type) return t.name;
  return "unknown(" + std::to_string(static_cast<unsigned>(type)) + ")";
}

bool is_request(MessageType type) {
  for (const TypeName& t : kTypeNames)
    if (t.type == type) return t.request;
  return false;
}

std::vector<MessageType> known_types() {
  std::vector<MessageType> out;
  for (const TypeName& t : kTypeNames) out.push_back(t.type);
  return out;
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

PayloadWeight weigh_payload(const uint8_t* bytes, size_t size, uint64_t stop_above) {
  return weigh_cbor(bytes, size, kMaxPayloadDepth, stop_above);
}

nlohmann::json decode_payload(const uint8_t* bytes, size_t size) {
  return decode_payload(bytes, size, weigh_payload(bytes, size));
}

namespace {

// nlohmann's DOM builder, but for the top-level entries under keys `keep` lacks, which are read
// and passed over without building anything of them.
class KeptKeysBuilder {
 public:
  using json = nlohmann::json;
  KeptKeysBuilder(json& result, const std::vector<std::string>& keep)
      : builder_(result, true), keep_(keep) {}

  bool null() { return scalar() || builder_.null(); }
  bool boolean(bool v) { return scalar() || builder_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return scalar() || builder_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    return scalar() || builder_.number_unsigned(v);
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return scalar() || builder_.number_float(v, s);
  }
  bool string(json::string_t& v) { return scalar() || builder_.string(v); }
  bool binary(json::binary_t& v) { return scalar() || builder_.binary(v); }
  bool start_object(std::size_t n) { return open() || builder_.start_object(n); }
  bool start_array(std::size_t n) { return open() || builder_.start_array(n); }
  bool end_object() { return close() || builder_.end_object(); }
  bool end_array() { return close() || builder_.end_array(); }
  bool key(json::string_t& k) {
    if (skipping_) return true;
    if (depth_ == 1 && std::find(keep_.begin(), keep_.end(), k) == keep_.end()) {
      skip_next_ = true;  // its value, whatever it is
      return true;
    }
    return builder_.key(k);
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    return builder_.parse_error(position, last_token, e);
  }

 private:
  // Each returns true when the event is passed over (so the builder is not called).
  bool scalar() {
    if (skipping_) return true;
    if (!skip_next_) return false;
    skip_next_ = false;
    return true;
  }
  bool open() {
    ++depth_;
    if (skipping_) return true;
    if (!skip_next_) return false;
    skip_next_ = false;
    skipping_ = true;
    skip_from_ = depth_;
    return true;
  }
  bool close() {
    const bool skipped = skipping_;
    if (skipping_ && depth_ == skip_from_) skipping_ = false;
    --depth_;
    return skipped;
  }

  nlohmann::detail::json_sax_dom_parser<json> builder_;
  const std::vector<std::string>& keep_;
  size_t depth_ = 0;
  bool skip_next_ = false;
  bool skipping_ = false;
  size_t skip_from_ = 0;
};

}  // namespace

nlohmann::json decode_payload(const uint8_t* bytes, size_t size, const PayloadWeight& weight,
                              const std::vector<std::string>* only_keys) {
  if (!weight.whole)  // its depth is not known to the end
    return decode_payload(bytes, size, weigh_payload(bytes, size), only_keys);
  if (weight.depth > kMaxPayloadDepth)
    throw FormatError("payload nests deeper than " + std::to_string(kMaxPayloadDepth) + " levels");
  try {
    // The SAX pass that from_cbor runs, without its last step: from_cbor returns `ok ? result :
    // discarded`, a copy of the whole document made while the original is alive, which doubles
    // the peak of every decode.
    nlohmann::json result;
    if (only_keys) {
      KeptKeysBuilder builder(result, *only_keys);
      nlohmann::json::sax_parse(bytes, bytes + size, &builder,
                                nlohmann::json::input_format_t::cbor);
      return result;
    }
    nlohmann::detail::json_sax_dom_parser<nlohmann::json> builder(result, true);
    nlohmann::json::sax_parse(bytes, bytes + size, &builder, nlohmann::json::input_format_t::cbor);
    return result;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("payload is not valid CBOR: ") + e.what());
  }
}

}  // namespace placement::protocol
