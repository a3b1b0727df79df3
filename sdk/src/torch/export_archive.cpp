// A .pt2 archive (torch.export.save) read through LibTorch's own zip reader: the program record,
// and the parameters, buffers and constants from their payload configs.

#include <cstring>
#include <fstream>

#include <ATen/ops/empty.h>
#include <c10/util/safe_numerics.h>
#include <caffe2/serialize/inline_container.h>

#include "export_frontend.h"
#include "export_schema.h"
#include "placement/capture_error.h"

namespace placement::detail {

namespace ex = torch::_export;

namespace {

class Archive {
 public:
  explicit Archive(const std::string& path) : path_(path) {
    try {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    } catch (const std::exception& e) {
      std::string message = e.what();
      if (const auto cut = message.find('\n'); cut != std::string::npos) message.resize(cut);
      throw CaptureError(path + ": not a readable .pt2 archive (" + message + ")");
    }
  }
  bool has(const std::string& name) const { return reader_->hasRecord(name); }
  std::string text(const std::string& name) const {
    at::DataPtr data;
    size_t size = 0;
    read(name, data, size);
    return std::string(static_cast<const char*>(data.get()), size);
  }
  void read(const std::string& name, at::DataPtr& data, size_t& size) const {
    if (!reader_->hasRecord(name)) throw CaptureError(path_ + ": the archive has no " + name);
    try {
      std::tie(data, size) = reader_->getRecord(name);
    } catch (const std::exception& e) {
      std::string message = e.what();
      if (const auto cut = message.find('\n'); cut != std::string::npos) message.resize(cut);
      throw CaptureError(path_ + ": " + name + " cannot be read (" + message +
                         "): is the archive complete?");
    }
  }
  std::vector<std::string> records() const { return reader_->getAllRecords(); }

 private:
  std::string path_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
};

// Parameters, buffers or constants of a .pt2 by name, from one payload config. Names that share a
// payload (tied weights) share its storage; the same view of it is the same tensor.
void read_payloads(const Archive& archive, const std::string& config_name, const std::string& dir,
                   bool weights, const std::string& path, std::map<std::string, at::Tensor>& out) {
  if (!archive.has(config_name)) return;
  ex::PayloadConfig config;
  try {
    config = nlohmann::json::parse(archive.text(config_name)).get<ex::PayloadConfig>();
  } catch (const std::exception& e) {
    throw CaptureError(path + ": " + config_name + " is not a payload config (" + e.what() + ")");
  }
  std::map<std::string, c10::Storage> storages;
  std::map<std::string, at::Tensor> views;
  for (const auto& [name, payload] : config.get_config()) {
    if (payload.get_use_pickle() || !payload.get_tensor_meta())
      throw CaptureError(path + ": '" + name +
                         "' is a pickled object (a tensor subclass or custom object), which "
                         "placementd cannot read");
    const ex::TensorMeta& meta = *payload.get_tensor_meta();
    std::vector<int64_t> sizes, strides;
    for (const auto& s : meta.get_sizes()) sizes.push_back(export_schema::concrete(s));
    for (const auto& s : meta.get_strides()) strides.push_back(export_schema::concrete(s));
    const int64_t offset = export_schema::concrete(meta.get_storage_offset());
    const c10::ScalarType dtype = export_schema::scalar_type(meta.get_dtype());
    const std::string what = path + ": '" + name + "'";
    if (sizes.size() != strides.size())
      throw CaptureError(what + " has " + std::to_string(sizes.size()) + " sizes and " +
                         std::to_string(strides.size()) + " strides");
    if (offset < 0 || std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v < 0; }) ||
        std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v < 0; }))
      throw CaptureError(what + " has a negative size, stride or offset");
    if (meta.get_requires_grad() && !c10::isFloatingType(dtype) && !c10::isComplexType(dtype))
      throw CaptureError(what + " is a " + c10::toString(dtype) + " tensor that requires grad");
    const std::string key = payload.get_path_name() + "|" + std::to_string(offset) + "|" +
                            c10::toString(dtype) + "|" + c10::str(c10::IntArrayRef(sizes)) +
                            c10::str(c10::IntArrayRef(strides));
    // A model exported on the meta device has no storages: its payloads all share one empty
    // record, and equal shapes are not the same tensor.
    const bool exported_on_meta = meta.get_device().get_type() == "meta";
    at::Tensor tensor;
    if (auto seen = views.find(key); seen != views.end() && !exported_on_meta) {
      tensor = seen->second;
    } else if (!weights || exported_on_meta) {
      tensor =
          at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype).device(at::kMeta));
    } else {
      auto storage = storages.find(payload.get_path_name());
      if (storage == storages.end()) {
        at::DataPtr data;
        size_t size = 0;
        archive.read(dir + payload.get_path_name(), data, size);
        at::Tensor bytes =
            at::empty({static_cast<int64_t>(size)}, at::TensorOptions().dtype(at::kByte));
        if (size > 0) std::memcpy(bytes.data_ptr(), data.get(), size);
        storage = storages.emplace(payload.get_path_name(), bytes.storage()).first;
      }
      // The last element's byte, in unsigned arithmetic that cannot wrap unnoticed: the sizes,
      // strides and offset come from the file.
      const bool empty = std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v == 0; });
      uint64_t last = static_cast<uint64_t>(offset);
      bool overflow = false;
      for (size_t d = 0; d < sizes.size() && !empty; ++d) {
        uint64_t span = 0;
        overflow |= c10::mul_overflows(static_cast<uint64_t>(sizes[d] - 1),
                                       static_cast<uint64_t>(strides[d]), &span);
        overflow |= c10::add_overflows(last, span, &last);
      }
      uint64_t needed = 0;
      overflow |= c10::add_overflows(last, uint64_t{1}, &last);
      overflow |= c10::mul_overflows(last, static_cast<uint64_t>(c10::elementSize(dtype)), &needed);
      if (!empty && (overflow || needed > storage->second.nbytes()))
        throw CaptureError(what + " needs " +
                           (overflow ? std::string("more than 2^64") : std::to_string(needed)) +
                           " bytes, " + dir + payload.get_path_name() + " holds " +
                           std::to_string(storage->second.nbytes()));
      tensor = at::empty({0}, at::TensorOptions().dtype(dtype))
                   .set_(storage->second, offset, sizes, strides);
    }
    if (meta.get_requires_grad() && !tensor.requires_grad()) tensor.set_requires_grad(true);
    views[key] = tensor;
    out[name] = tensor;
  }
}

}  // namespace

bool is_pt2(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4) || std::string(magic, 4) != std::string("PK\x03\x04", 4)) return false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string& r : reader.getAllRecords())
      if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0)
        return true;
  } catch (const std::exception&) {
    // A damaged archive: a torch.export.save file whose records cannot be listed says so when
    // loaded.
    return path.size() > 4 && path.compare(path.size() - 4, 4, ".pt2") == 0;
  }
  return false;
}

OpProgram load_pt2(const std::string& path, bool weights) {
  const Archive archive(path);
  std::string model = "model";
  if (!archive.has("models/model.json")) {
    std::vector<std::string> found;
    for (const std::string& r : archive.records())
      if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0)
        found.push_back(r.substr(7, r.size() - 12));
    if (found.size() != 1)
      throw CaptureError(path + ": " +
                         (found.empty() ? std::string("no program (models/*.json) in the archive")
                                        : "the archive holds " + std::to_string(found.size()) +
                                              " programs; save one model per file"));
    model = found[0];
  }
  if (archive.has("archive_format") && archive.text("archive_format") != "pt2")
    throw CaptureError(path + ": archive format '" + archive.text("archive_format") + "', not pt2");
  std::map<std::string, at::Tensor> tensors;
  read_payloads(archive, "data/weights/" + model + "_weights_config.json", "data/weights/", weights,
                path, tensors);
  read_payloads(archive, "data/constants/" + model + "_constants_config.json", "data/constants/",
                weights, path, tensors);
  OpProgram program = from_export(archive.text("models/" + model + ".json"), tensors, path);
  return program;
}

}  // namespace placement::detail
