#pragma once
// The [policy] and [exploration] keys, declared once: each key's name, the member it sets (whose
// initializer is its default), its range, whether a [[rules]] entry may set it, and its line in
// docs/configuration.md. The config parser, a rule's overrides (effective_policy) and the tests
// that hold etc/placementd.toml and docs/configuration.md to the defaults all read these tables;
// a new key is a member, a row here, its commented line in the shipped file and its doc row.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace placementd {

template <typename Section>
struct SectionKey {
  const char* name;
  std::variant<int64_t Section::*, double Section::*, std::string Section::*> field;
  /// A number's accepted range, both ends included; a string must have at least `min`
  /// characters (1: not empty).
  double min = 0, max = 0;
  /// Whether a [[rules]] entry may set it for the jobs it matches.
  bool per_rule = true;
  /// Where the file set it, for the checks that come after parsing (plugin names); or none.
  SourcePos Section::*where = nullptr;
  /// What it does, as docs/configuration.md's table of keys says it.
  const char* summary = "";
};

using PolicyKey = SectionKey<PolicyChoice>;
using ExplorationKey = SectionKey<ExplorationConfig>;

/// Every [policy] key, in the shipped file's order.
const std::vector<PolicyKey>& policy_keys();
/// Every [exploration] key, in the shipped file's order.
const std::vector<ExplorationKey>& exploration_keys();

/// Copies key `k` from `from` to `to` (a rule's override).
template <typename Section>
void copy_key(const SectionKey<Section>& k, const Section& from, Section& to) {
  std::visit([&](auto member) { to.*member = from.*member; }, k.field);
  if (k.where) to.*(k.where) = from.*(k.where);
}

}  // namespace placementd
