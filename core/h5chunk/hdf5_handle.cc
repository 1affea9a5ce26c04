#include "h5chunk/hdf5_handle.h"

#include <algorithm>
#include <cctype>

namespace h5chunk {

void Hid::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    default: H5Idec_ref(id_); break;
  }
  id_ = H5I_INVALID_HID;
}

// Scopes nest: only the outermost one switches HDF5's error printing off and back on. Each
// switch is two HDF5 API calls, costing as much as the chunk lookup the manifest makes per chunk
// inside its own scope (docs/benchmarks.md, "h5chunk on many small chunks"), so a read holds one
// scope around all of them.
static thread_local unsigned quiet_depth = 0;

QuietHdf5Errors::QuietHdf5Errors() {
  if (quiet_depth++ > 0) return;
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietHdf5Errors::~QuietHdf5Errors() {
  if (--quiet_depth > 0) return;
  H5Eset_auto2(H5E_DEFAULT, func_, data_);
}

namespace {
herr_t collect(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  // The innermost entries (first on the stack) name the real cause; the outer ones only
  // repeat "unable to read" up the call chain. Keep the first two.
  if (n < 2 && err->desc && *err->desc) {
    if (!out->empty()) out->append("; ");
    out->append(err->desc);
  }
  return 0;
}
}  // namespace

std::string without_pointers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < text.size();) {
    size_t digits = 0;
    if (text.compare(i, 2, "0x") == 0 || text.compare(i, 2, "0X") == 0) {
      while (i + 2 + digits < text.size() && hex(text[i + 2 + digits])) ++digits;
    }
    if (digits >= kMinPointerDigits) {
      out += "<pointer>";
      i += 2 + digits;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string hdf5_error_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &text);
  return without_pointers(text);
}

std::vector<FilterStep> filter_pipeline(hid_t dcpl) {
  std::vector<FilterStep> pipeline;
  const int nfilters = H5Pget_nfilters(dcpl);
  for (int i = 0; i < nfilters; ++i) {
    FilterStep f;
    unsigned cd[32];  // filters in use take at most 8; a longer list is cut, never overrun
    size_t ncd = 32;
    char name[256] = {0};
    unsigned config = 0;
    H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &f.flags, &ncd, cd, sizeof name,
                                     name, &config);
    f.id = static_cast<unsigned>(id);
    f.cd_values.assign(cd, cd + std::min<size_t>(ncd, 32));
    f.name = name;
    pipeline.push_back(std::move(f));
  }
  return pipeline;
}

}  // namespace h5chunk
