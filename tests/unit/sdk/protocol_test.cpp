#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"
#include "placement/serialization.h"

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

TEST(Protocol, TypeNames) {
  EXPECT_EQ(to_string(MessageType::kStepReport), "step_report");
  EXPECT_EQ(to_string(static_cast<MessageType>(999)), "unknown(999)");
  EXPECT_TRUE(is_known_type(16));
  EXPECT_FALSE(is_known_type(999));
}

}  // namespace
}  // namespace placement::protocol
