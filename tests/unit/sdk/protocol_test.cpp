#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placement/messages.h"
#include "placement/protocol.h"
#include "placement/serialization.h"
#include "test_graphs.h"

namespace placement::protocol {
namespace {

TEST(Protocol, HeaderIsLittleEndianWithMagic) {
  const auto bytes = encode_header({1, 16, 0x01020304, 0xa0b0c0d0});
  const std::array<uint8_t, kHeaderSize> expected = {'P', 'L', 'M', 'T', 1,    0,    16,   0,
                                                     4,   3,   2,   1,   0xd0, 0xc0, 0xb0, 0xa0};
  EXPECT_EQ(bytes, expected);
  Header h;
  ASSERT_TRUE(decode_header(bytes.data(), &h));
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.type, 16);
  EXPECT_EQ(h.length, 0x01020304u);
  EXPECT_EQ(h.request_id, 0xa0b0c0d0u);
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_FALSE(decode_header(bad.data(), &h));
}

TEST(Protocol, FrameCarriesCborPayload) {
  const nlohmann::json body = {{"job", "bert"}, {"n", 3}};
  const auto frame = encode_frame(MessageType::kAttach, 9, body);
  Header h;
  ASSERT_TRUE(decode_header(frame.data(), &h));
  EXPECT_EQ(h.type, static_cast<uint16_t>(MessageType::kAttach));
  EXPECT_EQ(h.length, frame.size() - kHeaderSize);
  EXPECT_EQ(decode_payload(frame.data() + kHeaderSize, h.length), body);
}

TEST(Protocol, OnlyTheKeysAskedForAreDecodedAndTheirValuesWhole) {
  const nlohmann::json body = {
      {"a", 1},
      {"padding", {{"x", nlohmann::json::array({1, 2, {{"y", std::string(1000, 'z')}}})}}},
      {"c", "kept"},
      {"d", nlohmann::json::array({{{"e", 1}, {"unknown_inside", {1, 2}}}})},
      {"more", nlohmann::json::array({nlohmann::json::array(), nlohmann::json::object(), nullptr})},
      {"tail", 2.5}};
  const auto frame = encode_frame(MessageType::kStepReport, 1, body);
  const uint8_t* payload = frame.data() + kHeaderSize;
  const size_t size = frame.size() - kHeaderSize;
  const std::vector<std::string> keep = {"a", "c", "d", "tail", "absent"};
  const nlohmann::json got = decode_payload(payload, size, weigh_payload(payload, size), &keep);
  EXPECT_EQ(got, (nlohmann::json{{"a", 1}, {"c", "kept"}, {"d", body["d"]}, {"tail", 2.5}}));
  // No key asked for: an empty map. Not a map: decoded as it is.
  const std::vector<std::string> none;
  EXPECT_EQ(decode_payload(payload, size, weigh_payload(payload, size), &none),
            nlohmann::json::object());
  const auto array =
      encode_frame(MessageType::kStepReport, 1, nlohmann::json::array({1, {{"k", 2}}}));
  EXPECT_EQ(
      decode_payload(array.data() + kHeaderSize, array.size() - kHeaderSize,
                     weigh_payload(array.data() + kHeaderSize, array.size() - kHeaderSize), &keep),
      nlohmann::json::array({1, {{"k", 2}}}));
  // What is passed over is still read: a payload cut short inside it is not CBOR.
  EXPECT_THROW(decode_payload(payload, size - 3, weigh_payload(payload, size - 3), &keep),
               FormatError);
}

// Every key a request's encoder writes is among those the daemon decodes of it: a field added to
// a message but not to keys_read would be dropped before its decoder saw it.
TEST(Protocol, TheKeysDecodedOfARequestAreEveryKeyItsEncoderWrites) {
  const DeviceSet devices = testing::devices(2);
  OpGraph graph = testing::chain(3);
  graph.parameters = {{"w", 64, {1}}};
  for (Op& op : graph.ops) op.profile["cpu"] = {0.001, 0.002, 0.0, 64};
  messages::Attach attach;
  attach.job = "j";
  attach.devices = devices;
  attach.sdk_version = "0.1.0";
  attach.torch_version = "2.11.0";
  attach.expected_steps = 10;
  attach.profile_steps = 2;
  attach.replica = messages::ReplicaInfo{0, 2, "g"};
  messages::StepReport step;
  step.placement_id = 3;
  step.step = 4;
  step.step_time_s = 0.5;
  step.ok = false;
  step.error = "failed";
  step.profiled = true;
  messages::ProfileReport profile;
  profile.placement_id = 3;
  profile.steps = 2;
  profile.ops.push_back({1, "cpu", {0.001, 0.002, 0.0, 64}});
  profile.peak_bytes = {1, 2};
  profile.held_bytes = {messages::HeldBytes{}, messages::HeldBytes{}};
  messages::ListJobs list;
  list.all = true;
  list.finished = true;
  messages::JobShow show;
  show.id = 7;
  const std::vector<std::pair<MessageType, nlohmann::json>> bodies = {
      {MessageType::kHello, messages::Hello{1, 5, "placementctl"}.to_json()},
      {MessageType::kAttach, attach.to_json()},
      {MessageType::kGraphUpload,
       messages::GraphUpload{graph, Placement::single(graph, 1)}.to_json(devices)},
      {MessageType::kStepReport, step.to_json()},
      {MessageType::kProfileReport, profile.to_json()},
      {MessageType::kListJobs, list.to_json()},
      {MessageType::kJobShow, show.to_json()},
      {MessageType::kDetach, messages::Detach{}.to_json()},
      {MessageType::kReload, messages::Reload{}.to_json()},
      {MessageType::kPlacementRequest, messages::PlacementRequest{}.to_json()}};
  for (const auto& [type, body] : bodies) {
    const std::optional<std::vector<std::string>> keys = messages::keys_read(type);
    ASSERT_TRUE(keys.has_value()) << to_string(type);
    for (const auto& item : body.items())
      EXPECT_NE(std::find(keys->begin(), keys->end(), item.key()), keys->end())
          << to_string(type) << " writes '" << item.key() << "', which the daemon would not decode";
  }
  EXPECT_FALSE(messages::keys_read(MessageType::kWelcome).has_value()) << "not a request";
}

TEST(Protocol, GarbagePayloadIsAFormatError) {
  const uint8_t garbage[] = {0xff, 0x00, 0x13};
  EXPECT_THROW(decode_payload(garbage, sizeof(garbage)), FormatError);
}

TEST(Protocol, DeepNestingIsRefusedBeforeParsing) {
  // 100k nested one-element arrays would overflow the recursive parser's stack.
  std::vector<uint8_t> deep(100000, 0x81);
  deep.push_back(0x00);
  try {
    decode_payload(deep.data(), deep.size());
    FAIL() << "accepted";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "payload nests deeper than 32 levels");
  }
  // Indefinite-length arrays (0x9f ... 0xff) and maps count the same way.
  std::vector<uint8_t> indefinite(1000, 0x9f);
  EXPECT_THROW(decode_payload(indefinite.data(), indefinite.size()), FormatError);
  std::vector<uint8_t> maps;
  for (int i = 0; i < 40; ++i) maps.insert(maps.end(), {0xa1, 0x61, 'k'});
  maps.push_back(0x00);
  EXPECT_THROW(decode_payload(maps.data(), maps.size()), FormatError);
}

TEST(Protocol, NestingUpToTheLimitPasses) {
  // {"v": [[...["x"]...]]}: one map plus `arrays` arrays.
  auto payload = [](size_t arrays) {
    nlohmann::json nested = "x";
    for (size_t i = 0; i < arrays; ++i) nested = nlohmann::json::array({nested, 1});
    return nlohmann::json{{"v", nested}};
  };
  const auto at_limit = encode_frame(MessageType::kStatus, 1, payload(kMaxPayloadDepth - 1));
  EXPECT_EQ(decode_payload(at_limit.data() + kHeaderSize, at_limit.size() - kHeaderSize),
            payload(kMaxPayloadDepth - 1));
  const auto over = encode_frame(MessageType::kStatus, 1, payload(kMaxPayloadDepth));
  EXPECT_THROW(decode_payload(over.data() + kHeaderSize, over.size() - kHeaderSize), FormatError);
}

size_t depth_of(const nlohmann::json& value) {
  if (!value.is_structured()) return 0;
  size_t deepest = 0;
  for (const auto& item : value) deepest = std::max(deepest, depth_of(item));
  return deepest + 1;
}

// One CBOR array of `count` copies of `item`.
std::vector<uint8_t> array_of(size_t count, uint8_t item) {
  std::vector<uint8_t> bytes = {0x9a, static_cast<uint8_t>(count >> 24),
                                static_cast<uint8_t>(count >> 16), static_cast<uint8_t>(count >> 8),
                                static_cast<uint8_t>(count)};
  bytes.insert(bytes.end(), count, item);
  return bytes;
}

TEST(PayloadWeight, AGraphUploadWeighsWhatItsDocumentTakes) {
  // A real message's document: per byte of CBOR, about 20 bytes of maps, arrays and strings (the
  // server allows 48). What it decodes to is bounded by the weight: payload_weight_fuzzer.
  const OpGraph graph = testing::unrolled_stack(2000);
  const DeviceSet devices = testing::devices(2, DeviceKind::kCpu);
  const nlohmann::json body = messages::GraphUpload{graph, std::nullopt}.to_json(devices);
  const std::vector<uint8_t> payload = nlohmann::json::to_cbor(body);
  const PayloadWeight w = weigh_payload(payload.data(), payload.size());
  EXPECT_GT(w.decoded_bytes, 10 * payload.size());
  EXPECT_LT(w.decoded_bytes, 30 * payload.size());
  EXPECT_EQ(decode_payload(payload.data(), payload.size(), w), body);
  EXPECT_EQ(w.depth, depth_of(body));
}

TEST(PayloadWeight, EmptyContainersAndNullsWeighWhatTheyWouldBuild) {
  // One byte each, and each a value the decoder allocates for: a megabyte of them is 100 MiB and
  // more of heap, which is what the weight says before any of it is built.
  const size_t n = 1 << 20;
  const auto maps = array_of(n, 0xa0), arrays = array_of(n, 0x80), nulls = array_of(n, 0xf6);
  EXPECT_GE(weigh_payload(maps.data(), maps.size()).decoded_bytes, 150 * n);
  EXPECT_GE(weigh_payload(arrays.data(), arrays.size()).decoded_bytes, 100 * n);
  EXPECT_GE(weigh_payload(nulls.data(), nulls.size()).decoded_bytes, 64 * n);
  EXPECT_EQ(weigh_payload(nulls.data(), nulls.size()).items, n + 1);
}

TEST(PayloadWeight, OnlyWhatTheDecoderReadsIsWeighed) {
  // The decoder reads one item and refuses what follows it: a megabyte of zeros is one integer.
  const std::vector<uint8_t> zeros(1 << 20, 0x00);
  EXPECT_LT(weigh_payload(zeros.data(), zeros.size()).decoded_bytes, 8192u);
  EXPECT_THROW(decode_payload(zeros.data(), zeros.size()), FormatError);
  // A string that claims 4 GiB of which 10 bytes came is read as far as those 10.
  std::vector<uint8_t> claim = {0x7a, 0xff, 0xff, 0xff, 0xff};
  claim.insert(claim.end(), 10, 'x');
  EXPECT_LT(weigh_payload(claim.data(), claim.size()).decoded_bytes, 8192u);
  // A long string costs its bytes a few times over (read buffer, value), never per character.
  std::vector<uint8_t> text = {0x7a, 0x00, 0x10, 0x00, 0x00};
  text.insert(text.end(), 1 << 20, 'x');
  const uint64_t text_weight = weigh_payload(text.data(), text.size()).decoded_bytes;
  EXPECT_GE(text_weight, 2u << 20);
  EXPECT_LE(text_weight, 5u << 20);
}

TEST(PayloadWeight, WeighingStopsPastTheLimitItIsGiven) {
  // A refusal needs no more than the limit: 8 MiB of empty maps took 34 ms to weigh whole, on the
  // I/O thread every other job waits on (docs/benchmarks.md).
  const auto maps = array_of(1 << 20, 0xa0);
  const PayloadWeight w = weigh_payload(maps.data(), maps.size(), 1 << 20);
  EXPECT_FALSE(w.whole);
  EXPECT_GT(w.decoded_bytes, 1u << 20);
  EXPECT_LT(w.decoded_bytes, 2u << 20);
  EXPECT_LT(w.items, 20000u);
  // A weight that stopped short is no licence to decode: the depth is checked to the end.
  std::vector<uint8_t> deep(1000, 0x81);
  deep.push_back(0x00);
  const PayloadWeight partial = weigh_payload(deep.data(), deep.size(), 0);
  EXPECT_FALSE(partial.whole);
  EXPECT_THROW(decode_payload(deep.data(), deep.size(), partial), FormatError);
  const std::vector<uint8_t> small = nlohmann::json::to_cbor(nlohmann::json{{"a", {1, 2}}});
  EXPECT_EQ(
      decode_payload(small.data(), small.size(), weigh_payload(small.data(), small.size(), 0)),
      (nlohmann::json{{"a", {1, 2}}}));
}

TEST(Protocol, TypeNames) {
  EXPECT_EQ(to_string(MessageType::kStepReport), "step_report");
  EXPECT_EQ(to_string(static_cast<MessageType>(999)), "unknown(999)");
  EXPECT_TRUE(is_known_type(16));
  EXPECT_FALSE(is_known_type(999));
}

}  // namespace
}  // namespace placement::protocol
