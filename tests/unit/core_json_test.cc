// dump_json and rounded (core/json.h): what every JSON file and line Tactician writes relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json.h"

namespace tac {
namespace {

using Json = nlohmann::ordered_json;

TEST(CoreJson, KeysKeepTheOrderTheyAreSetIn) {
  Json j = {{"z", 1}, {"a", "x"}, {"m", Json::array({true, nullptr})}};
  j["b"] = Json::object();
  EXPECT_EQ(dump_json(j), R"({"z":1,"a":"x","m":[true,null],"b":{}})");
  EXPECT_EQ(dump_json(j, 2), "{\n  \"z\": 1,\n  \"a\": \"x\",\n  \"m\": [\n    true,\n    null\n  ],\n  \"b\": {}\n}");
}

// JSON has no NaN or infinity: a file holding printf's "nan" could not be read back.
TEST(CoreJson, NonFiniteNumbersAreNull) {
  const double inf = std::numeric_limits<double>::infinity();
  const Json j = {std::nan(""), inf, -inf, rounded(std::nan(""), 3), rounded(inf), 1.5};
  EXPECT_EQ(dump_json(j), "[null,null,null,null,null,1.5]");
}

// JSON text is UTF-8: each invalid byte becomes U+FFFD, valid text (and escapes) stays as it is.
TEST(CoreJson, InvalidUtf8BecomesTheReplacementCharacter) {
  const Json j = std::string("a\xff\xfe b \xc3\xa9 \"q\" \\ \n\x01 \xe9");
  EXPECT_EQ(dump_json(j), "\"a\xEF\xBF\xBD\xEF\xBF\xBD b \xC3\xA9 \\\"q\\\" \\\\ \\n\\u0001 \xEF\xBF\xBD\"");
  const Json back = Json::parse(dump_json(j), nullptr, false);
  ASSERT_FALSE(back.is_discarded());
  EXPECT_EQ(back.get<std::string>(), "a\xEF\xBF\xBD\xEF\xBF\xBD b \xC3\xA9 \"q\" \\ \n\x01 \xEF\xBF\xBD");
}

TEST(CoreJson, RoundedKeepsTheDigitsAsked) {
  EXPECT_EQ(dump_json(rounded(0.1 + 0.2, 6)), "0.3");
  EXPECT_EQ(dump_json(rounded(2.0 / 3.0, 4)), "0.6667");
  EXPECT_EQ(dump_json(rounded(1234.56789, 1)), "1234.6");
  EXPECT_EQ(dump_json(rounded(2.0, 4)), "2.0");
  EXPECT_EQ(dump_json(rounded(1e-9, 6)), "0.0");
  EXPECT_EQ(dump_json(rounded(1.0 / 3.0)), "0.333333333");  // 9 significant digits
  EXPECT_EQ(dump_json(rounded(1.0 / 3.0 * 1e-12)), "3.33333333e-13");
  EXPECT_EQ(dump_json(rounded(-1e300, 2)), "-1e+300");
  EXPECT_EQ(rounded(0.25, 6), 0.25);
}

}  // namespace
}  // namespace tac
