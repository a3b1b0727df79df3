// The policy-state archive against what a damaged or hostile file may hold. The first case is
// what tests/fuzz/policy_state_fuzzer found in LibTorch's pickled archive (which policies used
// before): a tensor whose record holds fewer bytes than its shape takes.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include <caffe2/serialize/inline_container.h>
#include <torch/serialize.h>

#include "tensor_archive.h"

namespace placement::plugins {
namespace {

// An archive written by hand: `manifest` as given (with its checksum), records as given.
std::string handmade(const std::string& text,
                     const std::vector<std::pair<std::string, torch::Tensor>>& records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&out](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  const std::string crc = std::to_string(archive_crc32(text.data(), text.size()));
  writer.writeRecord("manifest.json", text.data(), text.size());
  writer.writeRecord("manifest.crc32", crc.data(), crc.size());
  for (const auto& [name, t] : records) writer.writeRecord(name, t.data_ptr(), t.nbytes());
  writer.writeEndOfFile();
  return out;
}

std::function<std::map<std::string, torch::Tensor>(const nlohmann::json&)> expecting(
    std::map<std::string, torch::Tensor> tensors) {
  return [tensors](const nlohmann::json&) { return tensors; };
}

std::string refusal(const std::string& bytes,
                    const std::map<std::string, torch::Tensor>& expected) {
  try {
    read_tensor_archive(bytes, expecting(expected));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TensorArchive, ARecordShorterThanItsShapeIsRefusedBeforeAnythingReadsIt) {
  const torch::Tensor weight = torch::ones({64});
  const torch::Tensor short_record = torch::ones({16});
  const nlohmann::json manifest = {
      {"format", "placement-tensors"},
      {"version", 1},
      {"tensors",
       {{{"name", "w"},
         {"dtype", "Float"},
         {"shape", {64}},
         {"record", "t0"},
         {"crc32", archive_crc32(short_record.data_ptr(), short_record.nbytes())}}}},
      {"extra", nlohmann::json::object()}};
  const std::string why =
      refusal(handmade(manifest.dump(), {{"t0", short_record}}), {{"w", weight}});
  EXPECT_NE(why.find("tensor 'w': 64 bytes where [64] takes 256"), std::string::npos) << why;
}

TEST(TensorArchive, AManifestNestedDeepIsRefusedBeforeAnythingCopiesIt) {
  // Copying a JSON value recurses: 200 000 levels would overflow the daemon's stack.
  const std::string deep = R"({"format":"placement-tensors","version":1,"tensors":[],"extra":)" +
                           std::string(200000, '[') + std::string(200000, ']') + "}";
  const std::string why = refusal(handmade(deep, {}), {});
  EXPECT_NE(why.find("nests deeper than 8"), std::string::npos) << why.substr(0, 200);
}

TEST(TensorArchive, RoundTripsEveryTensorAndTheExtraFacts) {
  const torch::Tensor a = torch::randn({3, 4}), b = torch::arange(5, torch::kLong),
                      c = torch::randn({2, 3}, torch::kDouble).t();  // not contiguous
  const std::string bytes = write_tensor_archive({{"a", a}, {"b", b}, {"c", c}}, {{"steps", 7}});
  const ReadArchive read = read_tensor_archive(bytes, [&](const nlohmann::json& extra) {
    EXPECT_EQ(extra.at("steps"), 7);
    return std::map<std::string, torch::Tensor>{{"a", a}, {"b", b}, {"c", c}};
  });
  EXPECT_TRUE(torch::equal(read.tensors.at("a"), a));
  EXPECT_TRUE(torch::equal(read.tensors.at("b"), b));
  EXPECT_TRUE(torch::equal(read.tensors.at("c"), c));
  EXPECT_EQ(read.extra.at("steps"), 7);
}

TEST(TensorArchive, AnotherPolicysTensorsAreRefusedByName) {
  const torch::Tensor a = torch::zeros({2, 2});
  const std::string bytes = write_tensor_archive({{"a", a}}, nlohmann::json::object());
  EXPECT_NE(refusal(bytes, {{"a", torch::zeros({2, 3})}})
                .find("'a' is Float [2, 2], this policy's Float [2, 3]"),
            std::string::npos);
  EXPECT_NE(
      refusal(bytes, {{"a", torch::zeros({2, 2}, torch::kDouble)}}).find("this policy's Double"),
      std::string::npos);
  EXPECT_NE(refusal(bytes, {{"b", a}}).find("tensor 'a' is not one of this policy's"),
            std::string::npos);
  EXPECT_NE(refusal(bytes, {{"a", a}, {"b", a}}).find("1 tensors where this policy has 2"),
            std::string::npos);
}

TEST(TensorArchive, ValuesThatAreNotFiniteAreRefused) {
  const torch::Tensor bad = torch::tensor({1.0F, std::numeric_limits<float>::quiet_NaN()});
  const std::string bytes = write_tensor_archive({{"a", bad}}, nlohmann::json::object());
  EXPECT_NE(refusal(bytes, {{"a", torch::zeros({2})}}).find("not finite"), std::string::npos);
}

TEST(TensorArchive, AStateFromLibTorchsPickledArchiveIsRefusedAsAnEarlierFormat) {
  // What policies saved before this format: the daemon starts afresh and says why.
  torch::serialize::OutputArchive archive;
  archive.write("a", torch::zeros({2}));
  std::ostringstream out;
  archive.save_to(out);
  EXPECT_NE(refusal(out.str(), {{"a", torch::zeros({2})}}).find("no manifest"), std::string::npos);
  EXPECT_NE(refusal("not a zip at all", {{"a", torch::zeros({2})}}).find("not a readable archive"),
            std::string::npos);
}

}  // namespace
}  // namespace placement::plugins
