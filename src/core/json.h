// JSON through nlohmann-json: the one way Tactician writes its JSON (knob lists, summaries, JSONL).
// Callers build a nlohmann::ordered_json (keys stay in the order they are set) and write it with
// dump_json; only .cc files include <nlohmann/json.hpp>, a large header.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace tac {

// `j` as JSON text: one line (indent < 0) or `indent` spaces per level. Invalid UTF-8 in a string
// becomes U+FFFD (JSON text must be UTF-8), so only text that was not UTF-8 is changed; NaN and
// infinities are written as null (JSON has neither).
std::string dump_json(const nlohmann::ordered_json& j, int indent = -1);

// `v` rounded to `decimals` digits after the point (negative: to 9 significant digits), so that
// dump_json, which writes the shortest text that reads back to the same double, writes at most
// those digits ("0.1234565", not "0.12345649999999999"). Non-finite values are returned as they
// are (written as null).
double rounded(double v, int decimals = -1);

}  // namespace tac
