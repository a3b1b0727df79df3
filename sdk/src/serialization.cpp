#include "placement/serialization.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#ifdef PLACEMENT_HAVE_ZLIB
#include <zlib.h>
#endif

#include <nlohmann/json.hpp>

#include "json_reader.h"
#include "op_profile_json.h"

namespace placement {

using detail::JsonReader;
using nlohmann::json;

namespace {

// Runs a type's own validate() and reports its complaint (which names the op, edge or device at
// fault) as a format error of the document.
template <typename F>
void check(F&& validate) {
  try {
    validate();
  } catch (const std::invalid_argument& e) {
    throw FormatError(e.what());
  }
}

TensorInfo tensor_from_json(const JsonReader& r) {
  r.object({"shape", "dtype", "bytes"});
  TensorInfo t;
  const JsonReader shape = r.field("shape");
  for (size_t i = 0; i < shape.array_size(); ++i) t.shape.push_back(shape.element(i).integer());
  if (r.has("dtype")) t.dtype = r.field("dtype").string();
  if (r.has("bytes")) t.bytes = r.field("bytes").uint();
  return t;
}

OpWork work_from_json(const JsonReader& r) {
  r.object({"math", "dtype", "forward_flops", "backward_flops", "forward_bytes", "backward_bytes",
            "forward_kernels", "backward_kernels", "rnn_layers", "rnn_steps", "estimated"});
  OpWork w;
  const JsonReader math = r.field("math");
  try {
    w.math = math_class_from_string(math.string());
  } catch (const std::invalid_argument& e) {
    math.fail(e.what());
  }
  if (r.has("dtype")) w.dtype = r.field("dtype").string();
  w.forward_flops = r.field("forward_flops").number();
  w.backward_flops = r.field("backward_flops").number();
  w.forward_bytes = r.field("forward_bytes").number();
  w.backward_bytes = r.field("backward_bytes").number();
  w.forward_kernels = r.field("forward_kernels").small_int();
  w.backward_kernels = r.field("backward_kernels").small_int();
  if (r.has("rnn_layers")) w.rnn_layers = r.field("rnn_layers").small_int();
  if (r.has("rnn_steps")) w.rnn_steps = r.field("rnn_steps").small_int();
  if (r.has("estimated")) w.estimated = r.field("estimated").boolean();
  if (!(w.forward_flops >= 0 && w.backward_flops >= 0 && w.forward_bytes >= 0 &&
        w.backward_bytes >= 0 && w.forward_kernels >= 0 && w.backward_kernels >= 0 &&
        w.rnn_layers >= 0 && w.rnn_steps >= 0))
    r.fail("work figures must be >= 0");
  return w;
}

json work_json(const OpWork& w) {
  json j = {{"math", to_string(w.math)},
            {"dtype", w.dtype},
            {"forward_flops", w.forward_flops},
            {"backward_flops", w.backward_flops},
            {"forward_bytes", w.forward_bytes},
            {"backward_bytes", w.backward_bytes},
            {"forward_kernels", w.forward_kernels},
            {"backward_kernels", w.backward_kernels}};
  if (w.rnn_layers > 0 || w.rnn_steps > 0) {
    j["rnn_layers"] = w.rnn_layers;
    j["rnn_steps"] = w.rnn_steps;
  }
  if (w.estimated) j["estimated"] = true;
  return j;
}

Op op_from_json(const JsonReader& r) {
  r.object({"id", "name", "kind", "outputs", "parameter_bytes", "pinned", "profile", "work"});
  Op op;
  op.id = r.field("id").small_int();
  op.name = r.field("name").string();
  op.kind = r.field("kind").string();
  if (r.has("outputs")) {
    const JsonReader outputs = r.field("outputs");
    for (size_t i = 0; i < outputs.array_size(); ++i)
      op.outputs.push_back(tensor_from_json(outputs.element(i)));
  }
  if (r.has("parameter_bytes")) op.parameter_bytes = r.field("parameter_bytes").uint();
  if (r.has("pinned")) {
    const JsonReader pinned = r.field("pinned");
    try {
      op.pinned = device_kind_from_string(pinned.string());
    } catch (const std::invalid_argument& e) {
      pinned.fail(e.what());
    }
  }
  if (r.has("profile")) {
    const JsonReader profile = r.field("profile");
    profile.object({"cpu", "cuda"});
    // The kinds this build knows; another (a newer peer's) is refused in a file, passed over in a
    // message.
    for (const char* kind : {"cpu", "cuda"})
      if (profile.has(kind))
        op.profile[kind] = detail::op_profile_from_json(profile.field(kind).object(
            {"forward_s", "backward_s", "update_s", "activation_bytes", "predicted"}));
  }
  if (r.has("work")) op.work = work_from_json(r.field("work"));
  return op;
}

}  // namespace

json to_json(const OpGraph& graph) {
  json ops = json::array();
  for (const Op& op : graph.ops) {
    json outputs = json::array();
    for (const TensorInfo& t : op.outputs)
      outputs.push_back({{"shape", t.shape}, {"dtype", t.dtype}, {"bytes", t.bytes}});
    json j = {{"id", op.id},
              {"name", op.name},
              {"kind", op.kind},
              {"outputs", outputs},
              {"parameter_bytes", op.parameter_bytes}};
    if (op.pinned) j["pinned"] = to_string(*op.pinned);
    if (!op.profile.empty()) {
      json profile = json::object();
      for (const auto& [kind, p] : op.profile) profile[kind] = detail::op_profile_to_json(p);
      j["profile"] = profile;
    }
    if (op.work) j["work"] = work_json(*op.work);
    ops.push_back(std::move(j));
  }
  json edges = json::array();
  for (const Edge& e : graph.edges) edges.push_back(json::array({e.src, e.dst, e.bytes}));
  json out = {{"name", graph.name}, {"ops", ops}, {"edges", edges}};
  if (!graph.parameters.empty()) {
    json parameters = json::array();
    for (const Parameter& p : graph.parameters)
      parameters.push_back({{"name", p.name}, {"bytes", p.bytes}, {"readers", p.readers}});
    out["parameters"] = std::move(parameters);
  }
  return out;
}

OpGraph graph_from_json(const json& doc, UnknownKeys unknown) {
  const JsonReader r(doc, "", unknown);
  r.object({"name", "ops", "edges", "parameters", "fingerprint"});
  OpGraph graph;
  if (r.has("name")) graph.name = r.field("name").string();
  const JsonReader ops = r.field("ops");
  graph.ops.reserve(ops.array_size());
  for (size_t i = 0; i < ops.array_size(); ++i) graph.ops.push_back(op_from_json(ops.element(i)));
  const JsonReader edges = r.field("edges");
  graph.edges.reserve(edges.array_size());
  for (size_t i = 0; i < edges.array_size(); ++i) {
    const JsonReader e = edges.element(i);
    if (e.array_size() != 3) e.fail("expected [source, destination, bytes]");
    graph.edges.push_back(
        {e.element(0).small_int(), e.element(1).small_int(), e.element(2).uint()});
  }
  if (r.has("parameters")) {
    const JsonReader parameters = r.field("parameters");
    graph.parameters.reserve(parameters.array_size());
    for (size_t i = 0; i < parameters.array_size(); ++i) {
      const JsonReader p = parameters.element(i);
      p.object({"name", "bytes", "readers"});
      Parameter parameter;
      parameter.name = p.field("name").string();
      parameter.bytes = p.field("bytes").uint();
      const JsonReader readers = p.field("readers");
      parameter.readers.reserve(readers.array_size());
      for (size_t k = 0; k < readers.array_size(); ++k)
        parameter.readers.push_back(readers.element(k).small_int());
      graph.parameters.push_back(std::move(parameter));
    }
  }
  check([&] { graph.validate(); });
  return graph;
}

json to_json(const DeviceSet& set) {
  json devices = json::array();
  for (const Device& d : set.devices) {
    json j = {{"name", d.name()}, {"memory_bytes", d.memory_bytes}, {"speed", d.speed}};
    if (const auto& s = d.spec)
      j["spec"] = {{"preset", s->preset},
                   {"fp32_flops", s->fp32_flops},
                   {"tf32_flops", s->tf32_flops},
                   {"bf16_flops", s->bf16_flops},
                   {"fp16_flops", s->fp16_flops},
                   {"memory_bandwidth", s->memory_bandwidth},
                   {"launch_s", s->launch_s},
                   {"compute_efficiency", s->compute_efficiency},
                   {"memory_efficiency", s->memory_efficiency},
                   {"conv_efficiency", s->conv_efficiency},
                   {"conv_layout_bandwidth", s->conv_layout_bandwidth},
                   {"pool_efficiency", s->pool_efficiency},
                   {"rnn_layer_s", s->rnn_layer_s},
                   {"rnn_step_s", s->rnn_step_s},
                   {"step_s", s->step_s}};
    devices.push_back(std::move(j));
  }
  return {{"devices", devices}, {"bandwidth", set.bandwidth}, {"latency", set.latency}};
}

DeviceSet devices_from_json(const json& doc, UnknownKeys unknown) {
  const JsonReader r(doc, "", unknown);
  r.object({"devices", "bandwidth", "latency"});
  DeviceSet set;
  const JsonReader devices = r.field("devices");
  for (size_t i = 0; i < devices.array_size(); ++i) {
    const JsonReader d = devices.element(i);
    d.object({"name", "memory_bytes", "speed", "spec"});
    Device device;
    const JsonReader name = d.field("name");
    try {
      device = parse_device_name(name.string());
    } catch (const std::invalid_argument& e) {
      name.fail(e.what());
    }
    device.memory_bytes = d.field("memory_bytes").uint();
    if (d.has("speed")) device.speed = d.field("speed").number();
    if (d.has("spec")) {
      const JsonReader s = d.field("spec");
      s.object({"preset", "fp32_flops", "tf32_flops", "bf16_flops", "fp16_flops",
                "memory_bandwidth", "launch_s", "compute_efficiency", "memory_efficiency",
                "conv_efficiency", "conv_layout_bandwidth", "pool_efficiency", "rnn_layer_s",
                "rnn_step_s", "step_s"});
      DeviceSpec spec;
      if (s.has("preset")) spec.preset = s.field("preset").string();
      spec.fp32_flops = s.field("fp32_flops").number();
      spec.memory_bandwidth = s.field("memory_bandwidth").number();
      if (s.has("tf32_flops")) spec.tf32_flops = s.field("tf32_flops").number();
      if (s.has("bf16_flops")) spec.bf16_flops = s.field("bf16_flops").number();
      if (s.has("fp16_flops")) spec.fp16_flops = s.field("fp16_flops").number();
      if (s.has("launch_s")) spec.launch_s = s.field("launch_s").number();
      if (s.has("compute_efficiency"))
        spec.compute_efficiency = s.field("compute_efficiency").number();
      if (s.has("memory_efficiency"))
        spec.memory_efficiency = s.field("memory_efficiency").number();
      if (s.has("conv_efficiency")) spec.conv_efficiency = s.field("conv_efficiency").number();
      if (s.has("conv_layout_bandwidth"))
        spec.conv_layout_bandwidth = s.field("conv_layout_bandwidth").number();
      if (s.has("pool_efficiency")) spec.pool_efficiency = s.field("pool_efficiency").number();
      if (s.has("rnn_layer_s")) spec.rnn_layer_s = s.field("rnn_layer_s").number();
      if (s.has("rnn_step_s")) spec.rnn_step_s = s.field("rnn_step_s").number();
      if (s.has("step_s")) spec.step_s = s.field("step_s").number();
      device.spec = spec;
    }
    set.devices.push_back(device);
  }
  auto matrix = [](const JsonReader& m) {
    std::vector<std::vector<double>> rows(m.array_size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const JsonReader row = m.element(i);
      for (size_t j = 0; j < row.array_size(); ++j) rows[i].push_back(row.element(j).number());
    }
    return rows;
  };
  set.bandwidth = matrix(r.field("bandwidth"));
  set.latency = matrix(r.field("latency"));
  check([&] { set.validate(); });
  return set;
}

json to_json(const Grouping& grouping) {
  return {{"num_groups", grouping.num_groups}, {"group_of_op", grouping.group_of_op}};
}

Grouping grouping_from_json(const json& doc, const OpGraph& graph) {
  const JsonReader r(doc, "");
  r.object({"num_groups", "group_of_op"});
  Grouping g;
  g.num_groups = r.field("num_groups").small_int();
  const JsonReader ops = r.field("group_of_op");
  for (size_t i = 0; i < ops.array_size(); ++i) g.group_of_op.push_back(ops.element(i).small_int());
  check([&] { g.validate(graph); });
  return g;
}

namespace {

const char* fetch_name(Fetch f) { return f == Fetch::kStream ? "stream" : "persist"; }

const char* activation_name(ActivationPolicy p) {
  switch (p) {
    case ActivationPolicy::kOffload:
      return "offload";
    case ActivationPolicy::kRecompute:
      return "recompute";
    case ActivationPolicy::kKeep:
      break;
  }
  return "keep";
}

json residence_json(const Residence& r) {
  json out = json::object();
  if (!r.parameters.empty()) {
    json home = json::array(), fetch = json::array();
    for (const ParameterResidence& p : r.parameters) {
      home.push_back(p.home);
      fetch.push_back(fetch_name(p.fetch));
    }
    out["parameter_home"] = std::move(home);
    out["parameter_fetch"] = std::move(fetch);
  }
  if (!r.activations.empty()) {
    json policy = json::array(), device = json::array();
    for (const ActivationResidence& a : r.activations) {
      policy.push_back(activation_name(a.policy));
      device.push_back(a.device);
    }
    out["activations"] = std::move(policy);
    out["activation_device"] = std::move(device);
  }
  return out;
}

// `remap` turns the document's device indices into the device set's.
Residence residence_from_json(const JsonReader& r, const std::vector<int>& remap) {
  r.object({"parameter_home", "parameter_fetch", "activations", "activation_device"});
  const auto device = [&remap](const JsonReader& d) {
    const int local = d.small_int();
    if (local == -1) return -1;
    if (local < 0 || static_cast<size_t>(local) >= remap.size())
      d.fail("device index " + std::to_string(local) + " is not in 'devices' (or -1)");
    return remap[static_cast<size_t>(local)];
  };
  // Two parallel arrays, both there or neither, of one length.
  const auto pair = [&r](const char* first, const char* second) -> size_t {
    if (r.has(first) != r.has(second))
      r.fail(std::string("'") + first + "' and '" + second + "' come together");
    if (!r.has(first)) return 0;
    const size_t n = r.field(first).array_size();
    if (r.field(second).array_size() != n)
      r.field(second).fail("has " + std::to_string(r.field(second).array_size()) + " entries, '" +
                           first + "' " + std::to_string(n));
    return n;
  };
  Residence out;
  const size_t parameters = pair("parameter_home", "parameter_fetch");
  for (size_t k = 0; k < parameters; ++k) {
    ParameterResidence p;
    p.home = device(r.field("parameter_home").element(k));
    const JsonReader fetch = r.field("parameter_fetch").element(k);
    const std::string name = fetch.string();
    if (name == "stream")
      p.fetch = Fetch::kStream;
    else if (name != "persist")
      fetch.fail("expected \"persist\" or \"stream\", not \"" + name + "\"");
    out.parameters.push_back(p);
  }
  const size_t ops = pair("activations", "activation_device");
  for (size_t i = 0; i < ops; ++i) {
    ActivationResidence a;
    const JsonReader policy = r.field("activations").element(i);
    const std::string name = policy.string();
    if (name == "offload")
      a.policy = ActivationPolicy::kOffload;
    else if (name == "recompute")
      a.policy = ActivationPolicy::kRecompute;
    else if (name != "keep")
      policy.fail("expected \"keep\", \"offload\" or \"recompute\", not \"" + name + "\"");
    a.device = device(r.field("activation_device").element(i));
    out.activations.push_back(a);
  }
  return out;
}

}  // namespace

json to_json(const Placement& placement, const DeviceSet& devices) {
  json names = json::array();
  for (const Device& d : devices.devices) names.push_back(d.name());
  json out = {{"devices", names}, {"device_of_op", placement.device_of_op}};
  if (!placement.residence.is_default()) out["residence"] = residence_json(placement.residence);
  return out;
}

Placement placement_from_json(const json& doc, const OpGraph& graph, const DeviceSet& devices,
                              UnknownKeys unknown) {
  const JsonReader r(doc, "", unknown);
  r.object({"devices", "device_of_op", "residence", "fingerprint"});
  const JsonReader names = r.field("devices");
  std::vector<int> remap;
  for (size_t i = 0; i < names.array_size(); ++i) {
    const JsonReader name = names.element(i);
    const int index = devices.index_of(name.string());
    if (index < 0) name.fail("device '" + name.string() + "' is not in the device set");
    remap.push_back(index);
  }
  Placement p;
  const JsonReader ops = r.field("device_of_op");
  for (size_t i = 0; i < ops.array_size(); ++i) {
    const JsonReader op = ops.element(i);
    const int local = op.small_int();
    if (local < 0 || static_cast<size_t>(local) >= remap.size())
      op.fail("device index " + std::to_string(local) + " is not in 'devices'");
    p.device_of_op.push_back(remap[local]);
  }
  if (r.has("residence")) p.residence = residence_from_json(r.field("residence"), remap);
  check([&] { p.validate(graph, devices); });
  return p;
}

namespace {

bool gzipped(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

std::string read_gzip(const std::string& path) {
#ifdef PLACEMENT_HAVE_ZLIB
  gzFile f = ::gzopen(path.c_str(), "rb");
  if (!f) throw FormatError(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = ::gzread(f, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  int err = 0;
  const char* message = ::gzerror(f, &err);
  const std::string problem = n < 0 ? std::string(message) : std::string();
  ::gzclose(f);
  if (n < 0) throw FormatError(path + ": not a valid gzip file: " + problem);
  return text;
#else
  throw FormatError(path + ": this build has no gzip support (zlib was not found)");
#endif
}

std::string gzip(const std::string& path, const std::string& text) {
#ifdef PLACEMENT_HAVE_ZLIB
  uLongf size = ::compressBound(static_cast<uLong>(text.size())) + 64;
  std::string out(size, '\0');
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper, so `zcat` reads the files too.
  if (::deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error(path + ": cannot start compression");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = ::deflate(&z, Z_FINISH);
  ::deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error(path + ": compression failed");
  out.resize(z.total_out);
  return out;
#else
  (void)text;
  throw std::runtime_error(path + ": this build has no gzip support (zlib was not found)");
#endif
}

}  // namespace

json read_json_file(const std::string& path) {
  try {
    if (gzipped(path)) return json::parse(read_gzip(path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FormatError(path + ": cannot open: " + std::strerror(errno));
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw FormatError(path + ": not valid JSON: " + e.what());
  }
}

void write_json_file(const std::string& path, const json& doc, int indent) {
  write_file_atomically(
      path, gzipped(path) ? gzip(path, doc.dump(indent) + "\n") : doc.dump(indent) + "\n");
}

void write_file_atomically(const std::string& path, const std::string& text) {
  // The temporary is a new file of this process's, never one that is there already: in a
  // directory another user can write, a planted file or link at a name known in advance would
  // otherwise be written through (or truncated). "<file>.tmp.<pid>.<random>": the state store
  // removes those of processes that are gone.
  std::random_device random;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
    char suffix[16];
    std::snprintf(suffix, sizeof(suffix), "%08x", random());
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + suffix;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw std::runtime_error(tmp + ": cannot create: " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error(tmp + ": write failed: " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // Closed whether or not the sync worked: a daemon whose disk fails keeps running.
  const bool synced = ::fsync(fd) == 0;
  const int sync_error = errno;
  const bool closed = ::close(fd) == 0;
  if (!synced || !closed) {
    const int err = synced ? errno : sync_error;
    ::unlink(tmp.c_str());
    throw std::runtime_error(tmp + (synced ? ": close failed: " : ": fsync failed: ") +
                             std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": rename failed: " + std::strerror(err));
  }
  // The rename is durable only once the directory is: without this a power loss may bring back
  // the old file (never a torn one). Filesystems that cannot sync a directory say EINVAL.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || (::fsync(dir_fd) != 0 && errno != EINVAL)) {
    const int err = errno;
    if (dir_fd >= 0) ::close(dir_fd);
    throw std::runtime_error(dir + ": fsync of the directory after writing " + path +
                             " failed: " + std::strerror(err));
  }
  ::close(dir_fd);
}

OpGraph load_graph_file(const std::string& path) {
  const json doc = read_json_file(path);
  try {
    return graph_from_json(doc);
  } catch (const FormatError& e) {
    throw FormatError(path + ": " + e.what());
  }
}

namespace detail {

OpProfile op_profile_from_json(const JsonReader& p) {
  OpProfile prof;
  prof.forward_s = p.field("forward_s").number();
  prof.backward_s = p.field("backward_s").number();
  if (p.has("update_s")) prof.update_s = p.field("update_s").number();
  if (p.has("activation_bytes")) prof.activation_bytes = p.field("activation_bytes").uint();
  if (p.has("predicted")) prof.predicted = p.field("predicted").boolean();
  if (!(prof.forward_s >= 0 && prof.backward_s >= 0 && prof.update_s >= 0))
    p.fail("times must be >= 0");
  return prof;
}

json op_profile_to_json(const OpProfile& p) {
  json j = {{"forward_s", p.forward_s},
            {"backward_s", p.backward_s},
            {"update_s", p.update_s},
            {"activation_bytes", p.activation_bytes}};
  if (p.predicted) j["predicted"] = true;
  return j;
}

}  // namespace detail

}  // namespace placement
