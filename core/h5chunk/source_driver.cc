#include "h5chunk/source_driver.h"

#include <sys/types.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace h5chunk {
namespace {

// The largest address the driver accepts, as HDF5's sec2 driver defines it (off_t's range).
constexpr haddr_t kMaxAddr = (haddr_t(1) << (8 * sizeof(off_t) - 1)) - 1;

// What a file access property list carries: copied and freed by libhdf5 through the class's
// fapl callbacks, so each copy holds the link.
struct FaplInfo {
  std::shared_ptr<SourceLink> link;
};

// One open file. `pub` first: libhdf5 sees an H5FD_t* (standard layout, so the cast is exact).
struct SourceFile {
  H5FD_t pub;
  haddr_t eoa;
  FaplInfo* info;  // owns the link for the file's life
};

SourceFile* self(H5FD_t* f) { return reinterpret_cast<SourceFile*>(f); }
const SourceFile* self(const H5FD_t* f) { return reinterpret_cast<const SourceFile*>(f); }

void push_error(H5E_major_t major, H5E_minor_t minor, const char* func, const std::string& message) {
  H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, major, minor, "%s", message.c_str());
}

void* fapl_get(H5FD_t* file) { return new FaplInfo(*self(file)->info); }
void* fapl_copy(const void* info) { return new FaplInfo(*static_cast<const FaplInfo*>(info)); }
herr_t fapl_free(void* info) {
  delete static_cast<FaplInfo*>(info);
  return 0;
}

// The link of the file libhdf5 names `name`, asked for on behalf of `from`'s file: `from` itself
// for its own name, else the file of that path in its tree. libhdf5 tries several names for a
// file that another names (each prefix from the environment and property lists, the current
// directory, the naming file's folder); only names in the tree can open, so a remote file never
// reads a local one.
hubfs::Result<std::shared_ptr<SourceLink>> link_for(const std::shared_ptr<SourceLink>& from, const std::string& name) {
  if (name == hdf5_file_name(*from)) return from;
  const std::shared_ptr<FileTree> tree = from->tree();
  if (!tree) {
    return hubfs::Unsupported("'" + from->name() + "' names another file ('" + name +
                              "'), which h5chunk cannot open for a file given as a file object; open the file "
                              "by its hf:// URL or local path instead");
  }
  const std::string root = "/" + tree->name() + "/";
  if (name.compare(0, root.size(), root) != 0) {
    return hubfs::NotFound("'" + name + "' is not in " + tree->name() + ": h5chunk opens no local file for '" +
                           from->name() + "'");
  }
  auto path = resolve_in_tree("", name.substr(root.size()));
  if (!path.ok()) return path.status();
  if (*path == from->tree_path()) return from;
  auto source = tree->open(*path);
  if (!source.ok()) return source.status().with_context(tree->name() + "/" + *path);
  return std::make_shared<SourceLink>(std::move(source).value(), from);
}

H5FD_t* open(const char* name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
  if (flags & (H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC | H5F_ACC_EXCL)) {
    push_error(H5E_ARGS, H5E_BADVALUE, __func__, "h5chunk's source driver is read-only");
    return nullptr;
  }
  const auto* info = static_cast<const FaplInfo*>(H5Pget_driver_info(fapl));
  if (!info || !info->link) {
    push_error(H5E_PLIST, H5E_BADVALUE, __func__, "no byte source in the file access property list");
    return nullptr;
  }
  (void)maxaddr;  // the source's size bounds every read
  auto link = link_for(info->link, name ? name : "");
  if (!link.ok()) {
    push_error(H5E_FILE, H5E_CANTOPENFILE, __func__, link.status().message());
    return nullptr;
  }
  auto* f = new SourceFile{};
  f->info = new FaplInfo{std::move(link).value()};
  f->eoa = 0;
  return &f->pub;
}

herr_t close(H5FD_t* file) {
  SourceFile* f = self(file);
  delete f->info;
  delete f;
  return 0;
}

// Files are the same when they are the same path of the same tree (a virtual dataset whose
// source is its own file, by name), or read the same source: libhdf5 then shares one open file.
int cmp(const H5FD_t* a, const H5FD_t* b) {
  const SourceLink& x = *self(a)->info->link;
  const SourceLink& y = *self(b)->info->link;
  const std::shared_ptr<FileTree> tx = x.tree(), ty = y.tree();
  if (tx && ty) {
    if (tx != ty) return std::less<const FileTree*>()(tx.get(), ty.get()) ? -1 : 1;
    const int c = x.tree_path().compare(y.tree_path());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (tx || ty) return tx ? 1 : -1;
  const ByteSource* p = x.inner();
  const ByteSource* q = y.inner();
  return std::less<const ByteSource*>()(p, q) ? -1 : p == q ? 0 : 1;
}

// As sec2 minus what writing needs: libhdf5 gathers small metadata reads into its accumulator
// and sieves small raw-data reads, so a source sees fewer, larger reads.
herr_t query(const H5FD_t*, unsigned long* flags) {
  *flags = H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE | H5FD_FEAT_AGGREGATE_METADATA |
           H5FD_FEAT_AGGREGATE_SMALLDATA;
  return 0;
}

haddr_t get_eoa(const H5FD_t* file, H5FD_mem_t) { return self(file)->eoa; }
herr_t set_eoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  self(file)->eoa = addr;
  return 0;
}
haddr_t get_eof(const H5FD_t* file, H5FD_mem_t) { return self(file)->info->link->size(); }

herr_t get_handle(H5FD_t* file, hid_t, void** handle) {
  *handle = static_cast<ByteSource*>(self(file)->info->link.get());
  return 0;
}

// Bytes past the end of the file read as zeros, as with sec2 (libhdf5 relies on it).
herr_t read(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buf) {
  SourceLink& link = *self(file)->info->link;
  if (addr == HADDR_UNDEF || addr > kMaxAddr || size > kMaxAddr - addr) {
    push_error(H5E_ARGS, H5E_OVERFLOW, __func__, "read of " + std::to_string(size) + " bytes at address " +
                                                    std::to_string(addr) + " overflows");
    return -1;
  }
  auto* out = static_cast<uint8_t*>(buf);
  while (size > 0) {
    auto n = link.pread(out, addr, size);  // a failure is recorded by the link
    if (!n.ok()) {
      push_error(H5E_IO, H5E_READERROR, __func__, n.status().message());
      return -1;
    }
    if (*n == 0) {
      std::memset(out, 0, size);
      break;
    }
    out += *n;
    addr += *n;
    size -= *n;
  }
  return 0;
}

herr_t write(H5FD_t*, H5FD_mem_t, hid_t, haddr_t, size_t, const void*) {
  push_error(H5E_IO, H5E_WRITEERROR, __func__, "h5chunk's source driver is read-only");
  return -1;
}

H5FD_class_t make_class() {
  H5FD_class_t c;
  std::memset(&c, 0, sizeof c);
  c.name = "h5chunk_source";
  c.maxaddr = kMaxAddr;
  c.fc_degree = H5F_CLOSE_WEAK;
  c.fapl_size = sizeof(FaplInfo);
  c.fapl_get = fapl_get;
  c.fapl_copy = fapl_copy;
  c.fapl_free = fapl_free;
  c.open = open;
  c.close = close;
  c.cmp = cmp;
  c.query = query;
  c.get_eoa = get_eoa;
  c.set_eoa = set_eoa;
  c.get_eof = get_eof;
  c.get_handle = get_handle;
  c.read = read;
  c.write = write;
  const H5FD_mem_t dichotomy[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
  std::memcpy(c.fl_map, dichotomy, sizeof dichotomy);
  return c;
}

}  // namespace

std::string hdf5_file_name(const ByteSource& source) {
  const std::shared_ptr<FileTree> tree = source.tree();
  return tree ? "/" + tree->name() + "/" + source.tree_path() : source.name();
}

hubfs::Result<std::string> resolve_in_tree(const std::string& from, const std::string& name) {
  if (name == ".") return from;
  const std::string quoted = "'" + name + "'";
  if (name.empty()) return hubfs::InvalidArgument("an empty file name");
  if (name[0] == '/') return hubfs::InvalidArgument(quoted + " is an absolute path, outside the repo");
  if (name.find("://") != std::string::npos) return hubfs::InvalidArgument(quoted + " is a URL, outside the repo");
  const size_t slash = from.rfind('/');
  const std::string joined = (slash == std::string::npos ? std::string() : from.substr(0, slash + 1)) + name;
  std::vector<std::string> parts;
  for (size_t at = 0; at <= joined.size();) {
    size_t end = joined.find('/', at);
    if (end == std::string::npos) end = joined.size();
    const std::string part = joined.substr(at, end - at);
    at = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts.empty()) {
        return hubfs::InvalidArgument(quoted + " (from '" + from + "') leaves the repo's root folder");
      }
      parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  if (parts.empty()) return hubfs::InvalidArgument(quoted + " names the repo's root folder, not a file");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

hubfs::Result<hid_t> source_fapl(std::shared_ptr<SourceLink> link) {
  static const H5FD_class_t kClass = make_class();
  static std::once_flag once;
  static hid_t driver = H5I_INVALID_HID;
  std::call_once(once, [] { driver = H5FDregister(&kClass); });
  if (driver < 0) return hubfs::Status(hubfs::Code::kInternal, "libhdf5 refused h5chunk's source driver");
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return hubfs::Status(hubfs::Code::kInternal, "libhdf5 cannot create a file access property list");
  FaplInfo info{std::move(link)};
  if (H5Pset_driver(fapl, driver, &info) < 0) {
    H5Pclose(fapl);
    return hubfs::Status(hubfs::Code::kInternal, "libhdf5 refused h5chunk's source driver for a file");
  }
  return fapl;
}

}  // namespace h5chunk
