// Errors travel as values. A Status says what failed and why, in words a user can act on;
// Result<T> is a value or the Status that prevented it.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace hubfs {

enum class Code {
  kOk = 0,
  kInvalidArgument,   // the caller asked for something malformed
  kNotFound,          // repo, revision, path or block does not exist
  kPermissionDenied,  // private/gated repo, missing or wrong token
  kUnavailable,       // could not connect, DNS, reset: worth retrying
  kTimeout,           // a bounded wait ran out
  kCorrupt,           // bytes failed a check (checksum, Content-Range, decoder)
  kOutOfRange,        // past end of file
  kIo,                // local I/O failure
  kUnsupported,       // understood, but not handled here (fallback territory)
  kInternal,          // a bug
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // The errno a filesystem reply should carry for this failure.
  int to_errno() const {
    switch (code_) {
      case Code::kOk: return 0;
      case Code::kInvalidArgument: return EINVAL;
      case Code::kNotFound: return ENOENT;
      case Code::kPermissionDenied: return EACCES;
      case Code::kOutOfRange: return EINVAL;
      case Code::kUnsupported: return ENOTSUP;
      case Code::kTimeout:
      case Code::kUnavailable:
      case Code::kCorrupt:
      case Code::kIo:
      case Code::kInternal: return EIO;
    }
    return EIO;
  }

  // Prefix the message with context ("reading /x: ..."), keeping the code.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
inline Status Corrupt(std::string m) { return {Code::kCorrupt, std::move(m)}; }
inline Status IoError(std::string m) { return {Code::kIo, std::move(m)}; }
inline Status Unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

// A value, or the Status explaining its absence. Never holds an ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                     // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {                // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Result built from ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hubfs
