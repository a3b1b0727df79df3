#include "plugins/plugin_registry.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>
#include <boost/dll/shared_library.hpp>

#include "placement/plugin_export.h"

// The daemon does not link LibTorch, but learned plugins do, and two LibTorch builds cannot share
// a process: plugins must match the LibTorch this build found (its TORCH_VERSION, which CMake reads
// from its headers: including them here would bring LibTorch's fmt beside spdlog's).
#ifndef PLACEMENT_TORCH_VERSION
#define PLACEMENT_TORCH_VERSION ""
#endif

namespace placementd {

namespace fs = std::filesystem;
using placement::PluginKind;

struct PluginRegistry::Loaded {
  placement::PluginInfo info;
  std::string file;
  placement::PluginValidateFn* validate = nullptr;
  placement::GrouperFactoryFn* create_grouper = nullptr;
  placement::PlacerFactoryFn* create_placer = nullptr;
  placement::AlgorithmFactoryFn* create_algorithm = nullptr;
};

namespace {

// Every library ever loaded stays mapped until the process ends; the vector itself is leaked on
// purpose so that no static destructor unloads a LibTorch-linked plugin at exit.
std::vector<boost::dll::shared_library>& keep_alive() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}
std::mutex& keep_alive_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

const char* factory_symbol(PluginKind kind) {
  switch (kind) {
    case PluginKind::kGrouper:
      return "placement_create_grouper";
    case PluginKind::kPlacer:
      return "placement_create_placer";
    case PluginKind::kAlgorithm:
      return "placement_create_algorithm";
  }
  return "";
}

// Directories in the configured order (the first one providing a name wins), files sorted within
// each, so a scan is deterministic.
std::vector<std::string> library_files(const std::vector<std::string>& dirs) {
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    std::vector<std::string> in_dir;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      spdlog::warn("plugin directory {} does not exist or is not a directory", dir);
      continue;
    }
    std::vector<fs::path> folders = {dir};
    for (const char* sub : {"grouper", "placer", "algorithm", "groupers", "placers", "algorithms"})
      if (fs::is_directory(fs::path(dir) / sub, ec)) folders.push_back(fs::path(dir) / sub);
    for (const fs::path& folder : folders) {
      for (const auto& entry : fs::directory_iterator(folder, ec)) {
        if (entry.path().extension() == ".so" && entry.is_regular_file(ec))
          in_dir.push_back(entry.path().string());
      }
    }
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  return files;
}

}  // namespace

PluginRegistry::PluginRegistry() = default;
PluginRegistry::~PluginRegistry() = default;

std::string PluginRegistry::load_into(const std::string& file,
                                      std::map<Key, std::shared_ptr<Loaded>>& found,
                                      std::map<Key, std::string>& found_file) {
  boost::dll::shared_library lib;
  try {
    // rtld_now: resolve every symbol at load, so a broken plugin fails here and not mid-request.
    lib.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return std::string("cannot load: ") + e.what();
  }
  {
    std::lock_guard<std::mutex> lock(keep_alive_mutex());
    keep_alive().push_back(lib);
  }
  if (!lib.has("placement_plugin_abi"))
    return "not a placementd plugin (no placement_plugin_abi entry point)";
  auto loaded = std::make_shared<Loaded>();
  loaded->file = file;
  try {
    // The ABI tag is checked before any other entry point is called: a mismatched plugin may
    // not even agree with us on what a std::string is.
    const uint32_t abi = lib.get_alias<placement::PluginAbiFn>("placement_plugin_abi")();
    if (abi != placement::plugin_abi_tag())
      return "plugin ABI tag " + std::to_string(abi) + " does not match the daemon's " +
             std::to_string(placement::plugin_abi_tag()) + " (rebuild the plugin against this SDK)";
    for (const char* symbol : {"placement_plugin_info", "placement_plugin_validate"})
      if (!lib.has(symbol)) return std::string("missing entry point ") + symbol;
    loaded->info = lib.get_alias<placement::PluginInfoFn>("placement_plugin_info")();
    loaded->validate = &lib.get_alias<placement::PluginValidateFn>("placement_plugin_validate");
    const char* factory = factory_symbol(loaded->info.kind);
    if (!lib.has(factory))
      return std::string("declares kind ") + to_string(loaded->info.kind) + " but has no " +
             factory;
    switch (loaded->info.kind) {
      case PluginKind::kGrouper:
        loaded->create_grouper = &lib.get_alias<placement::GrouperFactoryFn>(factory);
        break;
      case PluginKind::kPlacer:
        loaded->create_placer = &lib.get_alias<placement::PlacerFactoryFn>(factory);
        break;
      case PluginKind::kAlgorithm:
        loaded->create_algorithm = &lib.get_alias<placement::AlgorithmFactoryFn>(factory);
        break;
    }
  } catch (const std::exception& e) {
    return std::string("entry point failed: ") + e.what();
  }
  const placement::PluginInfo& info = loaded->info;
  if (info.name.empty()) return "plugin declares an empty name";
  if (!info.torch_version.empty() && info.torch_version != PLACEMENT_TORCH_VERSION)
    return "plugin links LibTorch " + info.torch_version + ", the daemon was built for " +
           (std::string(PLACEMENT_TORCH_VERSION).empty() ? std::string("none")
                                                         : std::string(PLACEMENT_TORCH_VERSION));
  if (auto errors = placement::resolve_params(info.hyperparameters, {}, nullptr); !errors.empty())
    return "plugin's own hyperparameter defaults are invalid: " + errors[0].name + ": " +
           errors[0].message;
  const Key key{info.kind, info.name};
  if (auto it = found_file.find(key); it != found_file.end())
    return std::string("duplicate ") + to_string(info.kind) + " name '" + info.name +
           "': already provided by " + it->second;
  found[key] = loaded;
  found_file[key] = file;
  return "";
}

std::vector<SkippedPlugin> PluginRegistry::scan(const std::vector<std::string>& dirs) {
  std::map<Key, std::shared_ptr<Loaded>> found;
  std::map<Key, std::string> found_file;
  std::vector<SkippedPlugin> skipped;
  for (const std::string& file : library_files(dirs)) {
    std::string reason = load_into(file, found, found_file);
    if (!reason.empty()) {
      spdlog::warn("skipping plugin {}: {}", file, reason);
      skipped.push_back({file, reason});
    } else {
      spdlog::debug("loaded plugin {}", file);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, plugin] : found) plugins_[key] = plugin;
  skipped_ = skipped;
  return skipped;
}

void PluginRegistry::adopt(PluginRegistry& staged) {
  if (&staged == this) return;
  std::scoped_lock lock(mutex_, staged.mutex_);
  // As scan() does: what the staged scan found replaces entries of the same kind and name, and
  // plugins it no longer found stay available (a job attached before may still create them).
  for (const auto& [key, plugin] : staged.plugins_) plugins_[key] = plugin;
  skipped_ = staged.skipped_;
}

std::string PluginRegistry::load_file(const std::string& file) {
  std::map<Key, std::shared_ptr<Loaded>> found;
  std::map<Key, std::string> found_file;
  std::string reason = load_into(file, found, found_file);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, plugin] : found) plugins_[key] = plugin;
  return reason;
}

std::vector<PluginEntry> PluginRegistry::plugins() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PluginEntry> out;
  for (const auto& [key, plugin] : plugins_) out.push_back({plugin->info, plugin->file});
  return out;
}

size_t PluginRegistry::count(PluginKind kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [key, plugin] : plugins_) n += key.first == kind ? 1 : 0;
  return n;
}

size_t PluginRegistry::skipped_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return skipped_.size();
}

std::vector<SkippedPlugin> PluginRegistry::skipped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return skipped_;
}

std::shared_ptr<PluginRegistry::Loaded> PluginRegistry::lookup(PluginKind kind,
                                                               const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plugins_.find({kind, name});
  return it == plugins_.end() ? nullptr : it->second;
}

bool PluginRegistry::has(PluginKind kind, const std::string& name) const {
  return lookup(kind, name) != nullptr;
}

std::optional<placement::PluginInfo> PluginRegistry::info(PluginKind kind,
                                                          const std::string& name) const {
  auto plugin = lookup(kind, name);
  if (!plugin) return std::nullopt;
  return plugin->info;
}

std::vector<placement::ParamError> PluginRegistry::check_params(
    PluginKind kind, const std::string& name, const placement::Params& params) const {
  auto plugin = lookup(kind, name);
  if (!plugin) {
    std::string known;
    for (const PluginEntry& p : plugins())
      if (p.info.kind == kind) known += (known.empty() ? "" : ", ") + p.info.name;
    return {{"", std::string("no ") + to_string(kind) + " plugin named '" + name +
                     "' is loaded (loaded: " + (known.empty() ? std::string("none") : known) +
                     ")"}};
  }
  placement::Params resolved;
  auto errors = placement::resolve_params(plugin->info.hyperparameters, params, &resolved);
  if (!errors.empty()) return errors;
  try {
    return plugin->validate(resolved);
  } catch (const std::exception& e) {
    return {{"", std::string("plugin's validate() threw: ") + e.what()}};
  }
}

placement::Params PluginRegistry::resolved(const Loaded& plugin,
                                           const placement::Params& params) const {
  placement::Params out;
  auto errors = placement::resolve_params(plugin.info.hyperparameters, params, &out);
  if (errors.empty()) {
    try {
      errors = plugin.validate(out);
    } catch (const std::exception& e) {
      errors.push_back({"", std::string("validate() threw: ") + e.what()});
    }
  }
  if (!errors.empty()) {
    std::string text;
    for (const auto& e : errors)
      text += (text.empty() ? "" : "; ") + (e.name.empty() ? "" : e.name + ": ") + e.message;
    throw PluginError(std::string(to_string(plugin.info.kind)) + " '" + plugin.info.name +
                      "': " + text);
  }
  return out;
}

namespace {

// Which factory of a loaded library makes a T, and the kind's name in messages.
template <typename T>
struct Factory;
template <>
struct Factory<placement::Grouper> {
  static constexpr PluginKind kKind = PluginKind::kGrouper;
  static constexpr auto kMember = &PluginRegistry::Loaded::create_grouper;
};
template <>
struct Factory<placement::Placer> {
  static constexpr PluginKind kKind = PluginKind::kPlacer;
  static constexpr auto kMember = &PluginRegistry::Loaded::create_placer;
};
template <>
struct Factory<placement::Algorithm> {
  static constexpr PluginKind kKind = PluginKind::kAlgorithm;
  static constexpr auto kMember = &PluginRegistry::Loaded::create_algorithm;
};

}  // namespace

template <typename T>
std::unique_ptr<T> PluginRegistry::create(const std::string& name,
                                          const placement::Params& params) const {
  constexpr PluginKind kind = Factory<T>::kKind;
  auto plugin = lookup(kind, name);
  if (!plugin) throw PluginError(check_params(kind, name, params).at(0).message);
  const placement::Params p = resolved(*plugin, params);
  const std::string what = std::string(to_string(kind)) + " '" + name + "'";
  std::unique_ptr<T> object;
  try {
    object = ((*plugin).*Factory<T>::kMember)(p);
  } catch (const std::exception& e) {
    throw PluginError(what + ": factory threw: " + e.what());
  } catch (...) {
    throw PluginError(what + ": factory threw something that is not a std::exception");
  }
  if (!object) throw PluginError(what + ": factory returned nothing");
  return object;
}

std::unique_ptr<placement::Grouper> PluginRegistry::create_grouper(
    const std::string& name, const placement::Params& params) const {
  return create<placement::Grouper>(name, params);
}

std::unique_ptr<placement::Placer> PluginRegistry::create_placer(
    const std::string& name, const placement::Params& params) const {
  return create<placement::Placer>(name, params);
}

std::unique_ptr<placement::Algorithm> PluginRegistry::create_algorithm(
    const std::string& name, const placement::Params& params) const {
  return create<placement::Algorithm>(name, params);
}

}  // namespace placementd
