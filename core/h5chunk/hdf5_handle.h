// Small RAII and error helpers around the HDF5 C API, shared by the h5chunk sources.
// Every HDF5 call in h5chunk runs on the caller's thread (never in a decode worker): Debian's
// libhdf5 is thread-safe through one global lock, so calling it from workers would only
// serialise them.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>
#include <vector>

#include "h5chunk/codecs.h"

namespace h5chunk {

// Owns one HDF5 identifier and closes it with the matching H5*close.
class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : id_(id) {}
  ~Hid() { reset(); }
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Silences HDF5's automatic error printing on this thread for its lifetime: h5chunk reports
// failures as Status values, and a stack dump on stderr for an expected miss (a dataset that
// does not exist) would only alarm the user.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors();
  ~QuietHdf5Errors();
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The innermost descriptions on this thread's HDF5 error stack ("can't open object; ..."),
// so a failed call can say why; "" when the stack is empty. Memory addresses in them are
// replaced (without_pointers), so the same file gives the same message in every run.
std::string hdf5_error_text();

// Hex numbers of at least this many digits are memory addresses: a 64-bit Linux process's heap,
// stack and libraries lie above 2^32 (12 digits, "0x55d0c3a1b2c0"); the flags, sizes and file
// offsets libhdf5 prints in hex are shorter.
inline constexpr size_t kMinPointerDigits = 9;
// `text` with every "0x" followed by kMinPointerDigits or more hex digits replaced by "<pointer>":
// such an address differs from run to run (ASLR), and a message that differs hides that the
// outcome did not.
std::string without_pointers(const std::string& text);

// The filter pipeline of a dataset creation property list, in the order HDF5 applied it on write
// (so decode_chunk undoes it last to first).
std::vector<FilterStep> filter_pipeline(hid_t dcpl);

}  // namespace h5chunk
