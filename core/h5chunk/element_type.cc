#include "h5chunk/element_type.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace h5chunk {

// ---------------------------------------------------------------------------------------------
// Conversion

Conversion::Conversion(std::vector<ConversionOp> ops, size_t elem_size)
    : ops_(std::move(ops)), elem_size_(elem_size) {
  if (ops_.empty()) return;
  const uint32_t w = ops_[0].size;
  if (w != 2 && w != 4 && w != 8) return;
  uint64_t expect = 0;
  for (const ConversionOp& op : ops_) {
    if (op.kind != ConversionOp::kSwap || op.size != w || op.offset != expect) return;
    expect += w;
  }
  if (expect == elem_size_) word_swap_ = w;
}

namespace {

template <typename T, T (*Swap)(T)>
void swap_words(uint8_t* data, size_t bytes) {
  // memcpy in and out: the buffer need not be aligned to T (a decoded chunk inside the output).
  for (size_t i = 0; i + sizeof(T) <= bytes; i += sizeof(T)) {
    T v;
    std::memcpy(&v, data + i, sizeof v);
    v = Swap(v);
    std::memcpy(data + i, &v, sizeof v);
  }
}

uint16_t bswap16(uint16_t v) { return __builtin_bswap16(v); }
uint32_t bswap32(uint32_t v) { return __builtin_bswap32(v); }
uint64_t bswap64(uint64_t v) { return __builtin_bswap64(v); }

}  // namespace

void Conversion::apply(uint8_t* data, size_t bytes) const {
  switch (word_swap_) {
    case 2: return swap_words<uint16_t, bswap16>(data, bytes);
    case 4: return swap_words<uint32_t, bswap32>(data, bytes);
    case 8: return swap_words<uint64_t, bswap64>(data, bytes);
    default: break;
  }
  for (size_t e = 0; e + elem_size_ <= bytes; e += elem_size_) {
    uint8_t* elem = data + e;
    for (const ConversionOp& op : ops_) {
      uint8_t* p = elem + op.offset;
      if (op.kind == ConversionOp::kSwap) {
        for (uint32_t i = 0, j = op.size - 1; i < j; ++i, --j) std::swap(p[i], p[j]);
      } else if (op.kind == ConversionOp::kZero) {
        std::memset(p, 0, op.size);
      } else {
        // H5T__conv_s_s from null-terminated to null-padded: the characters up to the first
        // NUL (all of them when there is none), then NULs.
        uint32_t n = 0;
        while (n < op.size && p[n] != 0) ++n;
        std::memset(p + n, 0, op.size - n);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Describing a type

namespace {

// A Python string literal ('...') for a field name (ast.literal_eval reads it back).
std::string py_str(const std::string& s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);  // UTF-8 passes through: h5py decodes names as UTF-8
    }
  }
  return out + "'";
}

// Ops beyond this (a huge array member of big-endian numbers) would make the per-element loop
// slower than H5Dread's own conversion; such types go to H5Dread.
constexpr size_t kMaxConversionOps = 4096;

// Built recursively for compound members and array bases.
struct Part {
  std::string kind;
  std::string np_native, np_stored;  // Python literals for np.dtype
  Hid mem;
  std::vector<ConversionOp> ops;
  std::string unsupported, blocker;
  bool damaged = false;  // `unsupported` says what only a damaged datatype message describes
};

std::string order_char(bool big_endian, size_t size) { return size == 1 ? "|" : big_endian ? ">" : "<"; }

// A copy of `type` in little-endian order: equal to the memory type exactly when the stored
// type differs from it by byte order alone.
bool equal_but_for_order(hid_t type, hid_t mem) {
  Hid le(H5Tcopy(type));
  if (!le.valid()) return false;
  if (H5Tset_order(le.get(), H5T_ORDER_LE) < 0) return false;
  return H5Tequal(le.get(), mem) > 0;
}

Hid ieee_half_le() {
  // HDF5 1.10 predefines no 16-bit float; this is IEEE binary16, as h5py defines it.
  Hid t(H5Tcopy(H5T_IEEE_F32LE));
  H5Tset_fields(t.get(), 15, 10, 5, 0, 10);
  H5Tset_precision(t.get(), 16);
  H5Tset_size(t.get(), 2);
  H5Tset_ebias(t.get(), 15);
  return t;
}

void describe_part(hid_t type, Part& out);

void describe_atomic_number(hid_t type, H5T_class_t cls, Part& out) {
  const size_t size = H5Tget_size(type);
  const bool be = H5Tget_order(type) == H5T_ORDER_BE;
  std::string code;
  hid_t native = H5I_INVALID_HID;
  Hid owned;
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    out.kind = is_signed ? "int" : "uint";
    switch (size) {
      case 1: native = is_signed ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8; break;
      case 2: native = is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16; break;
      case 4: native = is_signed ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT32; break;
      case 8: native = is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64; break;
      default: break;
    }
    code = (is_signed ? "i" : "u") + std::to_string(size);
  } else if (cls == H5T_BITFIELD) {
    out.kind = "bitfield";  // h5py reads bitfields as unsigned integers
    switch (size) {
      case 1: native = H5T_NATIVE_B8; break;
      case 2: native = H5T_NATIVE_B16; break;
      case 4: native = H5T_NATIVE_B32; break;
      case 8: native = H5T_NATIVE_B64; break;
      default: break;
    }
    code = "u" + std::to_string(size);
  } else {  // H5T_FLOAT
    out.kind = "float";
    switch (size) {
      case 2: owned = ieee_half_le(); native = owned.get(); break;
      case 4: native = H5T_NATIVE_FLOAT; break;
      case 8: native = H5T_NATIVE_DOUBLE; break;
      case 16: native = H5T_NATIVE_LDOUBLE; break;  // numpy's float128 is x86's long double
      default: break;
    }
    code = "f" + std::to_string(size);
  }
  if (native == H5I_INVALID_HID) {
    out.unsupported = std::to_string(size) + "-byte " + out.kind + " (numpy has no such type)";
    return;
  }
  out.mem = Hid(H5Tcopy(native));
  out.np_native = "'" + order_char(false, size) + code + "'";
  out.np_stored = "'" + order_char(be, size) + code + "'";
  if (!equal_but_for_order(type, out.mem.get())) {
    out.blocker = "a " + out.kind + " type of unusual precision or layout (" +
                  std::to_string(H5Tget_precision(type)) + " bits in " + std::to_string(size) +
                  " bytes), which H5Dread converts";
    return;
  }
  if (be && size > 1) out.ops.push_back({0, static_cast<uint32_t>(size), ConversionOp::kSwap});
  const size_t precision = H5Tget_precision(type);
  if (cls == H5T_FLOAT && H5Tget_offset(type) == 0 && precision % 8 == 0 && precision < 8 * size) {
    // Bits outside the number (x86 long double: 6 bytes): HDF5's float conversion leaves
    // them as the output buffer held them (h5py's results differ from read to read there), so
    // they carry nothing; zeros make h5chunk's results deterministic.
    out.ops.push_back({static_cast<uint32_t>(precision / 8), static_cast<uint32_t>(size - precision / 8),
                       ConversionOp::kZero});
  }
}

// h5py reads an enum as its base integer, and an int8 enum {FALSE: 0, TRUE: 1} as bool.
void describe_enum(hid_t type, Part& out) {
  Hid base(H5Tget_super(type));
  if (!base.valid()) {
    out.unsupported = "an enum whose base type HDF5 cannot describe";
    return;
  }
  describe_part(base.get(), out);
  if (!out.unsupported.empty()) return;
  bool is_bool = H5Tget_size(type) == 1 && H5Tget_nmembers(type) == 2;
  for (unsigned i = 0; is_bool && i < 2; ++i) {
    char* name = H5Tget_member_name(type, i);
    int8_t value = -1;
    is_bool = name && H5Tget_member_value(type, i, &value) >= 0 &&
              ((std::strcmp(name, "FALSE") == 0 && value == 0) || (std::strcmp(name, "TRUE") == 0 && value == 1));
    if (name) H5free_memory(name);
  }
  if (is_bool) {
    out.kind = "bool";
    out.np_native = out.np_stored = "'|b1'";
  } else {
    out.kind = "enum";
  }
}

void describe_string(hid_t type, Part& out) {
  out.kind = "string";
  if (H5Tis_variable_str(type) > 0) {
    out.unsupported = "variable-length string";
    return;
  }
  const size_t size = H5Tget_size(type);
  out.np_native = out.np_stored = "'|S" + std::to_string(size) + "'";
  // h5py reads fixed strings as null-padded ones of the same size and character set.
  out.mem = Hid(H5Tcopy(H5T_C_S1));
  H5Tset_size(out.mem.get(), size);
  H5Tset_strpad(out.mem.get(), H5T_STR_NULLPAD);
  H5Tset_cset(out.mem.get(), H5Tget_cset(type));
  switch (H5Tget_strpad(type)) {
    case H5T_STR_NULLPAD: break;  // the same type: H5Dread copies the bytes as stored
    case H5T_STR_NULLTERM:
      out.ops.push_back({0, static_cast<uint32_t>(size), ConversionOp::kNullTerm});
      break;
    default:
      out.blocker = "space-padded strings, which H5Dread converts";
      break;
  }
}

// The member indexes of a compound in offset order (ties, which only overlapping members of a
// damaged type can have, by name). libhdf5 numbers members in file order until a conversion of
// the type sorts its shared copy by offset in place (H5T__sort_value, run by H5T_conv_struct):
// after h5py (or anyone) read the dataset in this process, an open of the same file sees offset
// order. Sorting here gives the same dtype whatever the process did before
// (docs/hdf5-formats.md, "Compound member order").
std::vector<unsigned> members_by_offset(hid_t type, int n) {
  struct Key {
    size_t offset;
    std::string name;
    unsigned index;
  };
  std::vector<Key> keys;
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<unsigned>(i);
    char* name = H5Tget_member_name(type, u);
    keys.push_back({H5Tget_member_offset(type, u), name ? name : "", u});
    if (name) H5free_memory(name);
  }
  std::stable_sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.name < b.name;
  });
  std::vector<unsigned> order;
  for (const Key& k : keys) order.push_back(k.index);
  return order;
}

void describe_compound(hid_t type, Part& out) {
  const size_t size = H5Tget_size(type);
  const int n = H5Tget_nmembers(type);
  if (n <= 0) {
    out.unsupported = "a compound type without members";
    return;
  }
  out.kind = "compound";
  out.mem = Hid(H5Tcreate(H5T_COMPOUND, size));
  const std::vector<unsigned> order = members_by_offset(type, n);
  std::vector<std::string> names;
  std::vector<Part> members(n);
  std::vector<size_t> offsets;
  for (int k = 0; k < n; ++k) {
    const unsigned i = order[k];
    char* name = H5Tget_member_name(type, i);
    names.emplace_back(name ? name : "");
    if (name) H5free_memory(name);
    offsets.push_back(H5Tget_member_offset(type, i));
    Hid member(H5Tget_member_type(type, i));
    Part& m = members[k];
    if (!member.valid()) {
      m.unsupported = "a compound member HDF5 cannot describe";
    } else {
      describe_part(member.get(), m);
    }
    if (!m.unsupported.empty()) {
      out.unsupported = "a compound with member '" + names.back() + "' of " + m.unsupported;
      out.damaged = m.damaged;
      return;
    }
    // Only a damaged datatype message gives a member outside the record or a name twice; numpy
    // cannot represent either (its dtype constructor raises), so neither can be returned.
    const size_t member_size = H5Tget_size(member.get());
    if (offsets.back() > size || member_size > size - offsets.back()) {
      out.unsupported = "a compound whose member '" + names.back() + "' (" + std::to_string(member_size) +
                        " bytes at offset " + std::to_string(offsets.back()) + ") lies outside its " +
                        std::to_string(size) + "-byte record";
      out.damaged = true;
      return;
    }
    if (std::find(names.begin(), names.end() - 1, names.back()) != names.end() - 1) {
      out.unsupported = "a compound naming member '" + names.back() + "' twice";
      out.damaged = true;
      return;
    }
    if (out.blocker.empty() && !m.blocker.empty()) {
      out.blocker = "member '" + names.back() + "': " + m.blocker;
    }
    H5Tinsert(out.mem.get(), names.back().c_str(), offsets.back(), m.mem.get());
    for (ConversionOp op : m.ops) {
      op.offset += static_cast<uint32_t>(offsets.back());
      out.ops.push_back(op);
    }
  }
  // h5py's complex convention: members 'r' and 'i', the same float, packed.
  if (n == 2 && names[0] == "r" && names[1] == "i" && members[0].kind == "float" &&
      members[0].np_stored == members[1].np_stored && offsets[0] == 0 && offsets[1] * 2 == size &&
      (size == 8 || size == 16)) {
    out.kind = "complex";
    const std::string code = "c" + std::to_string(size);
    out.np_native = "'<" + code + "'";
    out.np_stored = "'" + members[0].np_stored.substr(1, 1) + code + "'";
    return;
  }
  std::string nat = "{'names': [", sto = nat, formats_n, formats_s, offs;
  for (int i = 0; i < n; ++i) {
    const std::string sep = i ? ", " : "";
    nat += sep + py_str(names[i]);
    formats_n += sep + members[i].np_native;
    formats_s += sep + members[i].np_stored;
    offs += sep + std::to_string(offsets[i]);
  }
  sto = nat;
  const std::string tail = "], 'offsets': [" + offs + "], 'itemsize': " + std::to_string(size) + "}";
  out.np_native = nat + "], 'formats': [" + formats_n + tail;
  out.np_stored = sto + "], 'formats': [" + formats_s + tail;
}

void describe_array(hid_t type, Part& out) {
  const int rank = H5Tget_array_ndims(type);
  Hid base(H5Tget_super(type));
  if (rank <= 0 || !base.valid()) {
    out.unsupported = "an array type HDF5 cannot describe";
    return;
  }
  std::vector<hsize_t> dims(rank);
  H5Tget_array_dims2(type, dims.data());
  Part b;
  describe_part(base.get(), b);
  if (!b.unsupported.empty()) {
    out.unsupported = "an array of " + b.unsupported;
    out.damaged = b.damaged;
    return;
  }
  out.kind = "array";
  out.blocker = b.blocker;
  std::string shape = "(";
  uint64_t count = 1;
  for (hsize_t d : dims) {
    shape += std::to_string(d) + ",";
    count *= d;
  }
  shape += ")";
  out.np_native = "(" + b.np_native + ", " + shape + ")";
  out.np_stored = "(" + b.np_stored + ", " + shape + ")";
  out.mem = Hid(H5Tarray_create2(b.mem.get(), static_cast<unsigned>(rank), dims.data()));
  if (b.ops.empty()) return;
  if (count * b.ops.size() > kMaxConversionOps) {
    if (out.blocker.empty()) out.blocker = "an array of " + std::to_string(count) + " big-endian elements, which H5Dread converts";
    return;
  }
  const uint32_t step = static_cast<uint32_t>(H5Tget_size(base.get()));
  for (uint64_t k = 0; k < count; ++k) {
    for (ConversionOp op : b.ops) {
      op.offset += static_cast<uint32_t>(k * step);
      out.ops.push_back(op);
    }
  }
}

void describe_part(hid_t type, Part& out) {
  const H5T_class_t cls = H5Tget_class(type);
  switch (cls) {
    case H5T_INTEGER:
    case H5T_FLOAT:
    case H5T_BITFIELD: return describe_atomic_number(type, cls, out);
    case H5T_ENUM: return describe_enum(type, out);
    case H5T_STRING: return describe_string(type, out);
    case H5T_COMPOUND: return describe_compound(type, out);
    case H5T_ARRAY: return describe_array(type, out);
    case H5T_OPAQUE: {
      const size_t size = H5Tget_size(type);
      out.kind = "opaque";
      out.np_native = out.np_stored = "'|V" + std::to_string(size) + "'";
      out.mem = Hid(H5Tcopy(type));
      return;
    }
    case H5T_VLEN: out.unsupported = "variable-length sequence"; return;
    case H5T_REFERENCE: out.unsupported = "object or region reference"; return;
    case H5T_TIME: out.unsupported = "HDF5 time type"; return;
    default: out.unsupported = "unknown type class " + std::to_string(static_cast<int>(cls)); return;
  }
}

std::optional<DType> plain_dtype(hid_t type, const Part& p) {
  if (p.kind != "int" && p.kind != "uint" && p.kind != "float") return std::nullopt;
  const size_t size = H5Tget_size(type);
  if (p.kind == "float") {
    if (size == 4) return DType::kFloat32;
    if (size == 8) return DType::kFloat64;
    return std::nullopt;
  }
  const bool s = p.kind == "int";
  switch (size) {
    case 1: return s ? DType::kInt8 : DType::kUInt8;
    case 2: return s ? DType::kInt16 : DType::kUInt16;
    case 4: return s ? DType::kInt32 : DType::kUInt32;
    case 8: return s ? DType::kInt64 : DType::kUInt64;
    default: return std::nullopt;
  }
}

}  // namespace

ElementDescription describe_element(hid_t file_type) {
  ElementDescription d;
  Part p;
  describe_part(file_type, p);
  d.type.size = H5Tget_size(file_type);
  d.type.kind = p.kind;
  d.unsupported = p.unsupported;
  d.damaged = p.damaged;
  if (d.unsupported.empty() && !p.mem.valid()) d.unsupported = "a type HDF5 cannot convert";
  if (!d.unsupported.empty()) return d;
  d.type.numpy = p.np_native;
  d.type.numpy_stored = p.np_stored;
  d.dtype = plain_dtype(file_type, p);
  d.mem_type = std::move(p.mem);
  d.fast_path_blocker = p.blocker;
  if (p.blocker.empty()) d.conversion = Conversion(std::move(p.ops), d.type.size);
  return d;
}

}  // namespace h5chunk
