#include <gtest/gtest.h>

#include <tuple>

#include "placement/param_table.h"

namespace placement {
namespace {

enum class Mode { kFast, kSlow };

struct Shaping {
  double scale = 5.0;
  int64_t warmup = 0;
};

struct Options {
  bool flag = true;
  int64_t steps = 4;
  double lr = 0.1;
  std::string device = "fastest";
  Mode mode = Mode::kSlow;
  // Not Shaping's own defaults: the outer struct decides.
  Shaping shaping{2.5, 7};
};

ParamTable<Shaping> shaping_table() {
  return ParamTable<Shaping>()
      .add("scale", &Shaping::scale, "logit scale", {0.0, 10.0})
      .add("warmup", &Shaping::warmup, "noisy samples", {0, std::nullopt});
}

ParamTable<Options> table() {
  return ParamTable<Options>()
      .add("flag", &Options::flag, "a switch")
      .add("steps", &Options::steps, "steps per update", {1, 100})
      .add("lr", &Options::lr, "learning rate", {std::nullopt, 1.0})
      .add("device", &Options::device, "device name")
      .add("mode", &Options::mode, "speed", {{"fast", Mode::kFast}, {"slow", Mode::kSlow}})
      .include(shaping_table(), &Options::shaping);
}

TEST(ParamTable, DeclaresEveryRowInOrderWithTheStructsDefaults) {
  const std::vector<HyperParameter> d = table().declared();
  ASSERT_EQ(d.size(), 7u);
  std::vector<std::string> names;
  for (const HyperParameter& h : d) names.push_back(h.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"flag", "steps", "lr", "device", "mode", "scale", "warmup"}));

  EXPECT_EQ(d[0].default_value, ParamValue(true));
  EXPECT_EQ(d[0].summary, "a switch");
  EXPECT_EQ(d[1].default_value, ParamValue(int64_t{4}));
  EXPECT_EQ(d[2].default_value, ParamValue(0.1));
  EXPECT_EQ(d[3].default_value, ParamValue(std::string("fastest")));
  EXPECT_EQ(d[4].default_value, ParamValue(std::string("slow")))
      << "an enum is declared as its text";
  EXPECT_EQ(d[5].default_value, ParamValue(2.5))
      << "an included row's default is the outer struct's";
  EXPECT_EQ(d[6].default_value, ParamValue(int64_t{7}));
}

TEST(ParamTable, CarriesBoundsAndChoices) {
  const std::vector<HyperParameter> d = table().declared();
  EXPECT_EQ(d[0].min, std::nullopt);
  EXPECT_EQ(d[0].max, std::nullopt);
  EXPECT_EQ(d[1].min, 1.0);
  EXPECT_EQ(d[1].max, 100.0);
  EXPECT_EQ(d[2].min, std::nullopt) << "an open lower bound stays open";
  EXPECT_EQ(d[2].max, 1.0);
  EXPECT_TRUE(d[3].choices.empty());
  EXPECT_EQ(d[4].choices, (std::vector<std::string>{"fast", "slow"}));
  EXPECT_EQ(d[6].min, 0.0);
  EXPECT_EQ(d[6].max, std::nullopt);

  // What the registry does with the declaration: the bounds reject a value outside them.
  const auto errors =
      resolve_params(d, {{"steps", int64_t{0}}, {"mode", std::string("warp")}}, nullptr);
  ASSERT_EQ(errors.size(), 2u);
}

TEST(ParamTable, ReadSetsEveryMemberType) {
  Params resolved;
  ASSERT_TRUE(resolve_params(table().declared(),
                             {{"flag", false},
                              {"steps", int64_t{9}},
                              {"lr", int64_t{1}},
                              {"device", std::string("cuda:1")},
                              {"mode", std::string("fast")},
                              {"warmup", int64_t{3}}},
                             &resolved)
                  .empty());
  const Options o = table().read(resolved);
  EXPECT_FALSE(o.flag);
  EXPECT_EQ(o.steps, 9);
  EXPECT_DOUBLE_EQ(o.lr, 1.0);
  EXPECT_EQ(o.device, "cuda:1");
  EXPECT_EQ(o.mode, Mode::kFast);
  EXPECT_DOUBLE_EQ(o.shaping.scale, 2.5) << "not given: the default";
  EXPECT_EQ(o.shaping.warmup, 3);
}

// Every member of an Options, to compare two at once.
auto members(const Options& o) {
  return std::tie(o.flag, o.steps, o.lr, o.device, o.mode, o.shaping.scale, o.shaping.warmup);
}

TEST(ParamTable, ReadOfTheDefaultsIsTheDefaultStruct) {
  Params resolved;
  ASSERT_TRUE(resolve_params(table().declared(), {}, &resolved).empty());
  const Options read = table().read(resolved);
  const Options defaults;
  EXPECT_EQ(members(read), members(defaults));
}

TEST(ParamTable, ReadRefusesUnresolvedParameters) {
  EXPECT_THROW(table().read({}), std::invalid_argument);
  Params resolved;
  ASSERT_TRUE(resolve_params(table().declared(), {}, &resolved).empty());
  resolved["mode"] = std::string("warp");
  EXPECT_THROW(table().read(resolved), std::invalid_argument);
}

TEST(ParamTable, ANameDeclaredTwiceIsABug) {
  ParamTable<Options> t;
  t.add("steps", &Options::steps, "steps");
  try {
    t.add("steps", &Options::lr, "again");
    FAIL() << "a duplicate name was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "hyperparameter 'steps' is declared twice");
  }
  EXPECT_EQ(t.declared().size(), 1u);
  // Through include(), too.
  EXPECT_THROW(table().include(shaping_table(), &Options::shaping), std::logic_error);
}

TEST(ParamTable, ADefaultOutsideItsOwnRangeIsABug) {
  try {
    ParamTable<Options>().add("steps", &Options::steps, "steps", {5, 10});
    FAIL() << "a default below min was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "hyperparameter 'steps': default must be >= 5.0, got 4");
  }
  EXPECT_THROW(ParamTable<Options>().add("lr", &Options::lr, "lr", {0.0, 0.05}), std::logic_error);
  EXPECT_THROW(ParamTable<Options>().add("device", &Options::device, "device", {"cpu", "cuda:0"}),
               std::logic_error);
  EXPECT_THROW(ParamTable<Options>().add("mode", &Options::mode, "speed", {{"fast", Mode::kFast}}),
               std::logic_error);
  // Shaping{}'s 5.0 is within [3, 10]; the 2.5 Options{} holds is not, and that is the default.
  const ParamTable<Shaping> from_three =
      ParamTable<Shaping>().add("scale", &Shaping::scale, "scale", {3.0, 10.0});
  EXPECT_THROW(ParamTable<Options>().include(from_three, &Options::shaping), std::logic_error);
}

}  // namespace
}  // namespace placement
