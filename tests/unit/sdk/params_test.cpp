#include <gtest/gtest.h>

#include "placement/params.h"

namespace placement {
namespace {

const std::vector<HyperParameter> kDeclared = {
    {"lr", 0.1, "", 0.0, 1.0, {}},
    {"steps", int64_t{4}, "", 1.0, 100.0, {}},
    {"mode", std::string("fast"), "", std::nullopt, std::nullopt, {"fast", "slow"}},
    {"flag", false, "", std::nullopt, std::nullopt, {}},
};

TEST(Params, DefaultsFillWhatIsNotGiven) {
  Params resolved;
  EXPECT_TRUE(resolve_params(kDeclared, {{"steps", int64_t{8}}}, &resolved).empty());
  EXPECT_EQ(param_int(resolved, "steps"), 8);
  EXPECT_DOUBLE_EQ(param_float(resolved, "lr"), 0.1);
  EXPECT_EQ(param_string(resolved, "mode"), "fast");
  EXPECT_FALSE(param_bool(resolved, "flag"));
}

TEST(Params, IntegerIsAcceptedForAFloat) {
  Params resolved;
  EXPECT_TRUE(resolve_params(kDeclared, {{"lr", int64_t{1}}}, &resolved).empty());
  EXPECT_DOUBLE_EQ(param_float(resolved, "lr"), 1.0);
}

TEST(Params, EveryProblemIsReported) {
  Params resolved{{"untouched", true}};
  const auto errors = resolve_params(kDeclared,
                                     {{"lr", 2.0},
                                      {"steps", std::string("many")},
                                      {"mode", std::string("warp")},
                                      {"colour", true}},
                                     &resolved);
  ASSERT_EQ(errors.size(), 4u);
  std::map<std::string, std::string> by_name;
  for (const auto& e : errors) by_name[e.name] = e.message;
  EXPECT_EQ(by_name["lr"], "must be <= 1.0, got 2.0");
  EXPECT_EQ(by_name["steps"], "expected int, got string \"many\"");
  EXPECT_EQ(by_name["mode"], "must be one of fast, slow, got \"warp\"");
  EXPECT_EQ(by_name["colour"], "unknown hyperparameter (accepted: lr, steps, mode, flag)");
  EXPECT_EQ(resolved.size(), 1u) << "resolved must stay untouched on error";
}

TEST(Params, FormatsAsToml) {
  EXPECT_EQ(format_param(ParamValue{1.0}), "1.0");
  EXPECT_EQ(format_param(ParamValue{int64_t{3}}), "3");
  EXPECT_EQ(format_param(ParamValue{std::string("a\"b")}), "\"a\\\"b\"");
  EXPECT_EQ(format_param(ParamValue{true}), "true");
  EXPECT_THROW(param_int({{"x", 1.0}}, "x"), std::invalid_argument);
  EXPECT_THROW(param_int({}, "x"), std::invalid_argument);
}

}  // namespace
}  // namespace placement
