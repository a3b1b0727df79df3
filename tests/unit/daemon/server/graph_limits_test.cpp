// [limits]: a graph upload is weighed from its CBOR before anything is built from it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "placement/messages.h"
#include "server/graph_limits.h"
#include "test_graphs.h"

namespace placementd {
namespace {

std::vector<uint8_t> upload_of(const placement::OpGraph& g) {
  const placement::DeviceSet d = placement::testing::devices(2);
  return nlohmann::json::to_cbor(placement::messages::GraphUpload{g, std::nullopt}.to_json(d));
}

TEST(GraphLimits, CountsOpsAndEdgesOfAnUploadWithoutDecodingIt) {
  const placement::OpGraph g = placement::testing::unrolled_stack(400);
  const auto bytes = upload_of(g);
  const auto counts = count_graph_upload(bytes.data(), bytes.size());
  ASSERT_TRUE(counts);
  EXPECT_EQ(counts->ops, 400u);
  EXPECT_EQ(counts->edges, g.edges.size());

  // Keys in any order (an ordered_json writes them as inserted), and names that only look like the
  // graph's elsewhere in the document.
  nlohmann::ordered_json reordered;
  reordered["placement"]["ops"] = {1, 2, 3};
  reordered["graph"]["ops"] = nlohmann::ordered_json::array({{{"edges", {1}}}, {{"x", 1}}});
  reordered["graph"]["name"] = "g";
  reordered["graph"]["edges"] = nlohmann::ordered_json::array();
  const auto other = nlohmann::ordered_json::to_cbor(reordered);
  ASSERT_EQ(other[1], 0x69) << "the first key is the 9-byte \"placement\"";
  const auto c = count_graph_upload(other.data(), other.size());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ops, 2u);
  EXPECT_EQ(c->edges, 0u);
}

TEST(GraphLimits, WhatIsNoGraphUploadIsLeftToTheDecoder) {
  const std::vector<uint8_t> garbage = {0xff, 0x00, 0x13};
  EXPECT_FALSE(count_graph_upload(garbage.data(), garbage.size()));
  const auto no_graph = nlohmann::json::to_cbor(nlohmann::json{{"ops", nlohmann::json::array()}});
  EXPECT_FALSE(count_graph_upload(no_graph.data(), no_graph.size()));
  auto truncated = upload_of(placement::testing::chain(10));
  truncated.resize(truncated.size() / 2);
  EXPECT_FALSE(count_graph_upload(truncated.data(), truncated.size()));
  // Nesting past the protocol's depth limit stops the pass instead of recursing on.
  // Indefinite-length containers are counted as any others.
  const std::vector<uint8_t> indefinite = {0xa1, 0x65, 'g', 'r',  'a',  'p',  'h',  0xbf, 0x63,
                                           'o',  'p',  's', 0x9f, 0xa0, 0xa0, 0xa0, 0xff, 0x65,
                                           'e',  'd',  'g', 'e',  's',  0x9f, 0xff, 0xff};
  const auto counted = count_graph_upload(indefinite.data(), indefinite.size());
  ASSERT_TRUE(counted);
  EXPECT_EQ(counted->ops, 3u);
  EXPECT_EQ(counted->edges, 0u);
  std::vector<uint8_t> deep(100000, 0x81);  // arrays of one element, 100 000 deep
  deep.push_back(0x00);
  EXPECT_FALSE(count_graph_upload(deep.data(), deep.size()));
}

TEST(GraphLimits, TheFirstLimitAGraphIsOverIsNamedWithItsFigure) {
  LimitsConfig limits;
  EXPECT_FALSE(graph_over_limits({80000, 140000}, 20u << 20, limits, 256))
      << "the HP's largest graph fits the defaults";
  EXPECT_EQ(graph_over_limits({412000, 700000}, 0, limits, 256),
            "graph has 412000 ops; [limits] max_graph_ops = 200000");
  limits.max_session_bytes = 256 << 20;
  EXPECT_EQ(graph_over_limits({80000, 140000}, 20u << 20, limits, 256),
            "graph of 80000 ops and 140000 edges needs about 580 MiB in the daemon; [limits] "
            "max_session_bytes = "
            "268435456 (256 MiB)");
  // The estimate grows with every part of the graph and with the cap's square.
  const uint64_t base = estimate_session_bytes({1000, 2000}, 100000, 256);
  EXPECT_GT(estimate_session_bytes({2000, 2000}, 100000, 256), base);
  EXPECT_GT(estimate_session_bytes({1000, 4000}, 100000, 256), base);
  EXPECT_GT(estimate_session_bytes({1000, 2000}, 100000, 4096), base + (uint64_t{1} << 29));
  // 500 ops with ten thousand outputs each: their bytes, not their count, say what they cost.
  EXPECT_GT(estimate_session_bytes({500, 0}, 60u << 20, 256), uint64_t{1} << 30);
  LimitsConfig one_gib;
  one_gib.max_session_bytes = int64_t{1} << 30;
  EXPECT_EQ(graph_over_limits({500, 0}, 60u << 20, one_gib, 256),
            "graph of 500 ops and 0 edges needs about 1692 MiB in the daemon; [limits] "
            "max_session_bytes = 1073741824 "
            "(1024 MiB)");
}

}  // namespace
}  // namespace placementd
