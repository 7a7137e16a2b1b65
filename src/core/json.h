// JSON string literals for the files and lines Tactician writes (knob lists, summaries, JSONL).
#pragma once

#include <string>
#include <string_view>

namespace tac {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid (overlong, surrogate, > U+10FFFF).
size_t utf8_length(std::string_view s, size_t i);
// Appends `s` as a JSON string literal: quotes, backslashes and control characters escaped;
// invalid UTF-8 bytes become U+FFFD (JSON text must be UTF-8).
void append_json_string(std::string& out, std::string_view s);
// `s` as a JSON string literal.
std::string json_quote(std::string_view s);
// `v` as a JSON number: `decimals` digits after the point, or 9 significant digits when negative;
// null when it is not finite (JSON has no NaN or Inf: printf's "nan" would make the file unreadable).
std::string json_number(double v, int decimals = -1);

}  // namespace tac
