#pragma once
// Reading a TOML++ document against a schema while collecting every error with its position, so a
// person fixes a file in one pass. Shared by the config and the topology loaders.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "toml/source_pos.h"

namespace placementd {

class TomlChecker {
 public:
  TomlChecker(std::string file, std::vector<ConfigError>& errors)
      : file_(std::move(file)), errors_(errors) {}

  SourcePos pos(const toml::node& node) const {
    const auto& b = node.source().begin;
    return {file_, b.line, b.column};
  }

  void error(const toml::node& node, const std::string& message) {
    errors_.push_back({pos(node), message});
  }

  /// Reports keys of `table` that are not in `known`.
  void only(const toml::table& table, const std::string& name,
            std::initializer_list<const char*> known) {
    only(table, name, std::vector<const char*>(known));
  }
  void only(const toml::table& table, const std::string& name,
            const std::vector<const char*>& known) {
    for (const auto& [key, node] : table) {
      bool ok = false;
      for (const char* k : known) ok = ok || key.str() == k;
      if (!ok) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        const auto& b = key.source().begin;
        std::string message = "unknown key '";
        message.append(key.str()).append("' in ").append(name);
        message.append(" (known: ").append(list).append(")");
        errors_.push_back({b.line ? SourcePos{file_, b.line, b.column} : pos(node), message});
      }
    }
  }

  /// A sub-table, or nullptr if absent; a non-table is an error.
  const toml::table* table(const toml::table& parent, const char* key, const std::string& name) {
    const toml::node* node = parent.get(key);
    if (!node) return nullptr;
    if (!node->is_table()) {
      error(*node, name + " must be a table, got " + type_name(*node));
      return nullptr;
    }
    return node->as_table();
  }

  static std::string type_name(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a float";
      case toml::node_type::boolean:
        return "a boolean";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::table:
        return "a table";
      default:
        return "a date/time";
    }
  }

  bool get_string(const toml::table& t, const char* key, const std::string& where,
                  std::string& out) {
    const toml::node* node = t.get(key);
    if (!node) return false;
    if (!node->is_string()) {
      error(*node, where + "." + key + " must be a string, got " + type_name(*node));
      return false;
    }
    out = node->value_exact<std::string>().value();
    return true;
  }

  bool get_int(const toml::table& t, const char* key, const std::string& where, int64_t& out,
               int64_t min, int64_t max) {
    const toml::node* node = t.get(key);
    if (!node) return false;
    if (!node->is_integer()) {
      error(*node, where + "." + key + " must be an integer, got " + type_name(*node));
      return false;
    }
    const int64_t v = node->value_exact<int64_t>().value();
    if (v < min || v > max) {
      error(*node, where + "." + key + " must be in [" + std::to_string(min) + ", " +
                       std::to_string(max) + "], got " + std::to_string(v));
      return false;
    }
    out = v;
    return true;
  }

  bool get_float(const toml::table& t, const char* key, const std::string& where, double& out,
                 double min, double max) {
    const toml::node* node = t.get(key);
    if (!node) return false;
    double v;
    if (node->is_floating_point()) {
      v = node->value_exact<double>().value();
    } else if (node->is_integer()) {
      v = static_cast<double>(node->value_exact<int64_t>().value());
    } else {
      error(*node, where + "." + key + " must be a number, got " + type_name(*node));
      return false;
    }
    if (!std::isfinite(v) || v < min || v > max) {
      std::ostringstream msg;
      msg << where << "." << key << " must be in [" << min << ", " << max << "], got " << v;
      error(*node, msg.str());
      return false;
    }
    out = v;
    return true;
  }

  bool get_strings(const toml::table& t, const char* key, const std::string& where,
                   std::vector<std::string>& out) {
    const toml::node* node = t.get(key);
    if (!node) return false;
    const toml::array* array = node->as_array();
    if (!array) {
      error(*node, where + "." + key + " must be an array of strings, got " + type_name(*node));
      return false;
    }
    std::vector<std::string> values;
    bool ok = true;
    for (const toml::node& item : *array) {
      if (!item.is_string()) {
        error(item, where + "." + key + " must hold strings only, found " + type_name(item));
        ok = false;
        continue;
      }
      values.push_back(item.value_exact<std::string>().value());
    }
    if (ok) out = std::move(values);
    return ok;
  }

 protected:
  std::string file_;
  std::vector<ConfigError>& errors_;
};

}  // namespace placementd
