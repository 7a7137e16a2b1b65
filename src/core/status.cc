#include "tactician/status.h"

namespace tac {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::ok: return "ok";
    case ErrorKind::invalid_model: return "invalid_model";
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::not_applicable: return "not_applicable";
    case ErrorKind::io_error: return "io_error";
    case ErrorKind::out_of_memory: return "out_of_memory";
    case ErrorKind::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(error_kind_name(kind_)) + ": " + message_;
}

Status Status::with_context(const std::string& prefix) const {
  if (is_ok()) return *this;
  return Status(kind_, prefix + message_);
}

}  // namespace tac
