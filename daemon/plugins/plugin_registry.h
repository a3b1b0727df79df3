#pragma once
// The plugins the daemon can use, loaded from shared libraries with Boost.DLL.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement/algorithm.h"
#include "placement/grouper.h"
#include "placement/placer.h"
#include "placement/plugin.h"

namespace placementd {

/// A plugin that could not be used, and why (one line for the log and `placementctl plugins`).
struct SkippedPlugin {
  std::string file;
  std::string reason;
};

/// A usable plugin.
struct PluginEntry {
  placement::PluginInfo info;
  std::string file;
};

/// Creating a plugin object failed: unknown name, bad hyperparameters, or the factory threw.
class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Process-wide table of plugins. Libraries are never unmapped: LibTorch-linked code crashes on
/// dlclose, so a reload adds and replaces factories and leaves old code mapped. Thread-safe.
class PluginRegistry {
 public:
  /// A library's entry points (plugin_registry.cpp).
  struct Loaded;
  PluginRegistry();
  ~PluginRegistry();

  /// Scans each directory and its grouper/, placer/, algorithm/ (and groupers/, ...) subfolders
  /// for *.so files, directories in the given order. A library that fails to load, has another
  /// plugin ABI, lacks an entry point, or repeats a (kind, name) another file of this scan provides
  /// is skipped with its reason. Plugins found replace earlier ones of the same kind and name;
  /// plugins no longer found stay available. Returns the skipped files of this scan.
  std::vector<SkippedPlugin> scan(const std::vector<std::string>& dirs);

  /// Takes what `staged` found as scan() would have (its plugins replace those of the same kind and
  /// name, the others stay; its skipped files): a reload scans the new config's directories into
  /// a staged registry, and only a config that is accepted changes what the daemon offers.
  void adopt(PluginRegistry& staged);
  /// Loads one library (the plugin-check tool and tests); returns the reason it was skipped, or "".
  std::string load_file(const std::string& file);

  std::vector<PluginEntry> plugins() const;
  /// Number of usable plugins of `kind` (cheap: no copies).
  size_t count(placement::PluginKind kind) const;
  /// Number of files skipped by the most recent scan.
  size_t skipped_count() const;
  /// Skipped files of the most recent scan.
  std::vector<SkippedPlugin> skipped() const;
  bool has(placement::PluginKind kind, const std::string& name) const;
  std::optional<placement::PluginInfo> info(placement::PluginKind kind,
                                            const std::string& name) const;

  /// Problems with `params` for a plugin: the generic type/range check against its declared
  /// hyperparameters, then the plugin's own validate(). Unknown plugin → one error.
  std::vector<placement::ParamError> check_params(placement::PluginKind kind,
                                                  const std::string& name,
                                                  const placement::Params& params) const;

  /// Resolve parameters (defaults filled in), validate and create. Throws PluginError.
  std::unique_ptr<placement::Grouper> create_grouper(const std::string& name,
                                                     const placement::Params& params) const;
  std::unique_ptr<placement::Placer> create_placer(const std::string& name,
                                                   const placement::Params& params) const;
  std::unique_ptr<placement::Algorithm> create_algorithm(const std::string& name,
                                                         const placement::Params& params) const;

 private:
  template <typename T>
  std::unique_ptr<T> create(const std::string& name, const placement::Params& params) const;
  using Key = std::pair<placement::PluginKind, std::string>;

  std::string load_into(const std::string& file, std::map<Key, std::shared_ptr<Loaded>>& found,
                        std::map<Key, std::string>& found_file);
  std::shared_ptr<Loaded> lookup(placement::PluginKind kind, const std::string& name) const;
  placement::Params resolved(const Loaded& plugin, const placement::Params& params) const;

  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<Loaded>> plugins_;
  std::vector<SkippedPlugin> skipped_;
};

}  // namespace placementd
