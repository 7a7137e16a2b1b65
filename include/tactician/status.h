// Errors are values: every fallible call returns a Status or a Result<T>.
// No exception crosses the library boundary.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tac {

// User errors (bad model, bad argument, unsupported feature) are distinct from internal
// errors (a bug in Tactician). `not_applicable` is not a failure: a tactic or rewrite that
// does not apply to a node says so with it.
enum class ErrorKind {
  ok = 0,
  invalid_model,     // the model file or graph is malformed
  invalid_argument,  // a user-supplied value (CLI flag, input file, route) is wrong
  unsupported,       // valid ONNX that Tactician does not implement (op, dtype, attribute)
  not_applicable,    // a tactic or rewrite does not apply here (not an error for the caller)
  io_error,          // a file could not be read or written
  out_of_memory,     // a size beyond the machine's memory, or an allocation that failed
  internal,          // a bug in Tactician
};

const char* error_kind_name(ErrorKind kind);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return kind_ == ErrorKind::ok; }
  explicit operator bool() const { return is_ok(); }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // "<kind>: <message>", one line.
  std::string to_string() const;
  // Prefix the message with context ("file.onnx: ", "node 'conv1' (Conv): ").
  Status with_context(const std::string& prefix) const;

 private:
  ErrorKind kind_ = ErrorKind::ok;
  std::string message_;
};

inline Status invalid_model(std::string m) { return {ErrorKind::invalid_model, std::move(m)}; }
inline Status invalid_argument(std::string m) { return {ErrorKind::invalid_argument, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorKind::unsupported, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorKind::io_error, std::move(m)}; }
inline Status out_of_memory(std::string m) { return {ErrorKind::out_of_memory, std::move(m)}; }
inline Status internal_error(std::string m) { return {ErrorKind::internal, std::move(m)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tac

#define TAC_CONCAT_INNER(a, b) a##b
#define TAC_CONCAT(a, b) TAC_CONCAT_INNER(a, b)
#define TAC_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::tac::Status tac_status_ = (expr);      \
    if (!tac_status_.is_ok()) return tac_status_; \
  } while (0)
#define TAC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.is_ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
#define TAC_ASSIGN_OR_RETURN(lhs, expr) \
  TAC_ASSIGN_OR_RETURN_IMPL(TAC_CONCAT(tac_result_, __LINE__), lhs, expr)
