#include "tensor_archive.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>

#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <boost/crc.hpp>

namespace placement::plugins {
namespace {

constexpr const char* kFormat = "placement-tensors";
constexpr int kVersion = 1;
constexpr const char* kManifest = "manifest.json";
constexpr const char* kManifestCrc = "manifest.crc32";
// A manifest names a few hundred tensors: anything much larger is not one.
constexpr size_t kMaxManifestBytes = 1 << 20;
// A manifest nests four deep (tensors, an entry, its shape); copying a JSON value recurses, so a
// deeply nested one would overflow the stack.
constexpr int kMaxDepth = 8;
// The fuzzer cannot forge checksums: its build reads past them to reach what they guard.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kCheckCrc = false;
#else
constexpr bool kCheckCrc = true;
#endif

std::invalid_argument refused(const std::string& why) {
  return std::invalid_argument("policy state refused: " + why);
}

// LibTorch's in-memory adapter copies whatever range the zip directory names; this one reads
// nothing past the end (the zip reader then reports a short read).
class BoundedReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReader(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* = "") const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - static_cast<size_t>(pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

std::string first_line(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  if (const size_t line = text.find('\n'); line != std::string::npos) text.resize(line);
  return text;
}

std::string shape_text(c10::IntArrayRef sizes) {
  return sizes.size() > 8 ? "[" + std::to_string(sizes.size()) + " dimensions]" : c10::str(sizes);
}

// A name from the file, as a log line may show it: printable, and short.
std::string shown(const std::string& name) {
  std::string out;
  for (const char c : name.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return name.size() > 64 ? out + "..." : out;
}

}  // namespace

// The zip reader LibTorch builds skips the zip's own checksums: a flipped bit in a tensor would
// load as another value. The manifest carries each record's CRC-32, and a record its own.
uint32_t archive_crc32(const void* data, size_t size) {
  boost::crc_32_type crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

std::string write_tensor_archive(const NamedTensors& tensors, const nlohmann::json& extra) {
  std::vector<torch::Tensor> contiguous;
  for (const auto& named : tensors)
    contiguous.push_back(named.second.detach().to(torch::kCPU).contiguous());
  nlohmann::json listed = nlohmann::json::array();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor& t = contiguous[i];
    listed.push_back({{"name", tensors[i].first},
                      {"dtype", c10::toString(t.scalar_type())},
                      {"shape", t.sizes().vec()},
                      {"record", "t" + std::to_string(i)},
                      {"crc32", archive_crc32(contiguous[i].data_ptr(), contiguous[i].nbytes())}});
  }
  const std::string manifest = nlohmann::json{
      {"format", kFormat},
      {"version", kVersion},
      {"tensors", listed},
      {"extra", extra}}.dump();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&out](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord(kManifest, manifest.data(), manifest.size());
  const std::string manifest_crc = std::to_string(archive_crc32(manifest.data(), manifest.size()));
  writer.writeRecord(kManifestCrc, manifest_crc.data(), manifest_crc.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    writer.writeRecord("t" + std::to_string(i), contiguous[i].data_ptr(), contiguous[i].nbytes());
  writer.writeEndOfFile();
  return out;
}

ReadArchive read_tensor_archive(
    const std::string& bytes,
    const std::function<std::map<std::string, torch::Tensor>(const nlohmann::json& extra)>&
        expected) {
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  nlohmann::json manifest;
  bool too_deep = false;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(
        std::make_shared<BoundedReader>(bytes));
    if (!reader->hasRecord(kManifest))
      throw refused("no manifest (not a policy state of this version)");
    const size_t size = reader->getRecordSize(kManifest);
    if (size > kMaxManifestBytes || size > bytes.size())
      throw refused("a manifest of " + std::to_string(size) + " bytes");
    std::string text(size, '\0');
    reader->getRecord(kManifest, text.data(), size);
    if (!reader->hasRecord(kManifestCrc) || reader->getRecordSize(kManifestCrc) > 10)
      throw refused("the manifest's checksum is missing");
    std::string crc(reader->getRecordSize(kManifestCrc), '\0');
    reader->getRecord(kManifestCrc, crc.data(), crc.size());
    if (kCheckCrc && crc != std::to_string(archive_crc32(text.data(), text.size())))
      throw refused("the manifest does not match its checksum (a damaged file)");
    manifest = nlohmann::json::parse(
        text,
        [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
          if (depth > kMaxDepth) too_deep = true;
          return depth <= kMaxDepth;
        },
        /*allow_exceptions=*/false);
  } catch (const c10::Error& e) {
    throw refused("not a readable archive: " + first_line(e));
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {  // LibTorch's reader lets some of its parsing errors out
    throw refused(std::string("not a readable archive: ") + e.what());
  }
  if (too_deep) throw refused("the manifest nests deeper than " + std::to_string(kMaxDepth));
  if (manifest.is_discarded() || !manifest.is_object()) throw refused("the manifest is not JSON");
  const auto format = manifest.find("format");
  if (format == manifest.end() || *format != kFormat || !manifest.contains("version") ||
      manifest["version"] != kVersion)
    throw refused("format or version is not " + std::string(kFormat) + " " +
                  std::to_string(kVersion));
  const auto listed = manifest.find("tensors");
  if (listed == manifest.end() || !listed->is_array())
    throw refused("the manifest lists no tensors");
  ReadArchive read;
  read.extra = manifest.value("extra", nlohmann::json::object());
  const std::map<std::string, torch::Tensor> wanted = expected(read.extra);
  if (listed->size() != wanted.size())
    throw refused(std::to_string(listed->size()) + " tensors where this policy has " +
                  std::to_string(wanted.size()));
  for (const nlohmann::json& entry : *listed) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("record") || !entry["record"].is_string() || !entry.contains("dtype") ||
        !entry["dtype"].is_string() || !entry.contains("shape") || !entry["shape"].is_array() ||
        !entry.contains("crc32") || !entry["crc32"].is_number_unsigned())
      throw refused("a tensor entry without name, record, dtype, shape or checksum");
    const std::string name = shown(entry["name"]);
    const auto like = wanted.find(entry["name"].get<std::string>());
    if (like == wanted.end()) throw refused("tensor '" + name + "' is not one of this policy's");
    if (read.tensors.count(like->first)) throw refused("tensor '" + name + "' listed twice");
    const torch::Tensor& model = like->second;
    std::vector<int64_t> shape;
    for (const nlohmann::json& d : entry["shape"]) {
      if (!d.is_number_integer())
        throw refused("tensor '" + name + "': a shape that is not integers");
      shape.push_back(d.get<int64_t>());
    }
    if (entry["dtype"] != c10::toString(model.scalar_type()) || shape != model.sizes().vec())
      throw refused("tensor '" + name + "' is " + shown(entry["dtype"].get<std::string>()) + " " +
                    shape_text(shape) + ", this policy's " + c10::toString(model.scalar_type()) +
                    " " + shape_text(model.sizes()));
    torch::Tensor t = torch::empty(model.sizes(), model.options().device(torch::kCPU));
    const std::string record = entry["record"];
    try {
      if (!reader->hasRecord(record))
        throw refused("tensor '" + name + "': no record " + shown(record));
      const size_t size = reader->getRecordSize(record);
      if (size != t.nbytes())
        throw refused("tensor '" + name + "': " + std::to_string(size) + " bytes where " +
                      shape_text(shape) + " takes " + std::to_string(t.nbytes()));
      reader->getRecord(record, t.data_ptr(), size);
    } catch (const c10::Error& e) {
      throw refused("tensor '" + name + "': " + first_line(e));
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const std::exception& e) {
      throw refused("tensor '" + name + "': " + e.what());
    }
    if (kCheckCrc && archive_crc32(t.data_ptr(), t.nbytes()) != entry["crc32"])
      throw refused("tensor '" + name + "' does not match its checksum (a damaged file)");
    if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>())
      throw refused("tensor '" + name + "' holds a value that is not finite");
    read.tensors.emplace(like->first, std::move(t));
  }
  return read;
}

}  // namespace placement::plugins
