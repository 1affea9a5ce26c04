#include "h5chunk/external_files.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "h5chunk/checked.h"
#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

using hubfs::Status;

namespace {

// The advice every refusal for a file without a tree ends with.
const char* const kNoTreeFix =
    "which h5chunk cannot open for a file given as a file object; open the file by its hf:// URL "
    "or a local path instead";

// The path's groups and itself: "/a/b/c" -> "/a", "/a/b", "/a/b/c".
std::vector<std::string> path_prefixes(const std::string& path) {
  std::vector<std::string> out;
  std::string at;
  for (size_t i = 0; i <= path.size();) {
    size_t end = path.find('/', i);
    if (end == std::string::npos) end = path.size();
    if (end > i) {
      at += "/" + path.substr(i, end - i);
      out.push_back(at);
    }
    i = end + 1;
  }
  return out;
}

// Whether `file` has a dataset at `path`, every group on the way included (H5Lexists fails on a
// path whose group is missing).
bool dataset_exists(hid_t file, const std::string& path) {
  for (const std::string& p : path_prefixes(path)) {
    if (H5Lexists(file, p.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_DATASET;
}

struct Mapping {
  std::string file;
  std::string dataset;
};

std::vector<Mapping> virtual_mappings(hid_t dcpl) {
  std::vector<Mapping> out;
  size_t count = 0;
  if (H5Pget_virtual_count(dcpl, &count) < 0) return out;
  auto text = [](ssize_t (*get)(hid_t, size_t, char*, size_t), hid_t dcpl, size_t i) {
    const ssize_t n = get(dcpl, i, nullptr, 0);
    if (n < 0) return std::string();
    std::string s(static_cast<size_t>(n) + 1, '\0');
    get(dcpl, i, s.data(), s.size());
    s.resize(static_cast<size_t>(n));
    return s;
  };
  for (size_t i = 0; i < count; ++i) {
    out.push_back({text(H5Pget_virtual_filename, dcpl, i), text(H5Pget_virtual_dsetname, dcpl, i)});
  }
  return out;
}

// A name with printf-style fields (%b, %%): libhdf5 substitutes block numbers into it.
bool is_pattern(const std::string& name) { return name.find('%') != std::string::npos; }

}  // namespace

Status check_external_links(hid_t file, const std::string& dataset_path, const std::shared_ptr<SourceLink>& link,
                            const std::string& where) {
  const std::shared_ptr<FileTree> tree = link->tree();
  std::string from = link->tree_path();  // the file the next component is in
  for (const std::string& p : path_prefixes(dataset_path)) {
    H5L_info_t info;
    if (H5Lexists(file, p.c_str(), H5P_DEFAULT) <= 0 || H5Lget_info(file, p.c_str(), &info, H5P_DEFAULT) < 0) {
      return Status::Ok();  // opening the dataset says what is missing
    }
    if (info.type != H5L_TYPE_EXTERNAL) continue;
    std::vector<char> value(info.u.val_size);
    const char* target_file = nullptr;
    const char* target_object = nullptr;
    unsigned flags = 0;
    if (H5Lget_val(file, p.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0 ||
        H5Lunpack_elink_val(value.data(), value.size(), &flags, &target_file, &target_object) < 0) {
      return hubfs::Corrupt(where + ": the external link '" + p + "' cannot be read: " + hdf5_error_text());
    }
    const std::string target = std::string(target_file) + ":" + target_object;
    if (!tree) return hubfs::IoError(where + ": '" + p + "' is an external link to '" + target + "', " + kNoTreeFix);
    auto resolved = resolve_in_tree(from, target_file);
    if (!resolved.ok()) {
      return hubfs::IoError(where + ": the external link '" + p + "' names '" + target + "', outside " +
                            tree->name() + " (" + resolved.status().message() +
                            "); h5chunk reads only files of the same repo for an hf:// file");
    }
    if (auto opened = tree->open(*resolved); !opened.ok()) {
      return Status(opened.status().code(), where + ": the external link '" + p + "' names '" + target +
                                                "', and " + tree->name() + "/" + *resolved +
                                                " cannot be opened: " + opened.status().message());
    }
    from = *resolved;
  }
  return Status::Ok();
}

Status check_virtual_sources(hid_t file, const std::string& home, hid_t dcpl, const std::shared_ptr<SourceLink>& link,
                             const std::string& where) {
  const std::shared_ptr<FileTree> tree = link->tree();
  if (!tree) {
    return hubfs::IoError(where + " is a virtual dataset whose data lives in other files, " + kNoTreeFix);
  }
  auto fapl_id = source_fapl(link);
  if (!fapl_id.ok()) return fapl_id.status();
  Hid fapl(*fapl_id);
  std::map<std::string, Hid> opened;  // tree path -> the file (mappings often share one)
  const std::vector<Mapping> mappings = virtual_mappings(dcpl);
  for (size_t i = 0; i < mappings.size(); ++i) {
    const Mapping& m = mappings[i];
    const std::string source = "'" + m.file + ":" + m.dataset + "'";
    const std::string mapping = where + ": its mapping " + std::to_string(i) + " reads " + source;
    auto resolved = resolve_in_tree(home, m.file);
    if (!resolved.ok()) {
      return hubfs::IoError(mapping + ", outside " + tree->name() + " (" + resolved.status().message() +
                            "); h5chunk reads only files of the same repo for an hf:// file");
    }
    if (is_pattern(m.file) || is_pattern(m.dataset)) continue;
    hid_t in = file;
    if (*resolved != home) {
      auto it = opened.find(*resolved);
      if (it == opened.end()) {
        if (auto probe = tree->open(*resolved); !probe.ok()) {
          return Status(probe.status().code(), mapping + ", and " + tree->name() + "/" + *resolved +
                                                   " cannot be opened: " + probe.status().message() +
                                                   " (libhdf5 would read fill values)");
        }
        const std::string name = "/" + tree->name() + "/" + *resolved;
        Hid src(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()));
        if (!src.valid()) {
          if (Status e = link->take_error(); !e.ok()) return e.with_context(mapping);
          return hubfs::IoError(mapping + ", and " + tree->name() + "/" + *resolved + " is not an HDF5 file: " +
                                hdf5_error_text());
        }
        it = opened.emplace(*resolved, std::move(src)).first;
      }
      in = it->second.get();
    }
    if (!dataset_exists(in, m.dataset)) {
      if (Status e = link->take_error(); !e.ok()) return e.with_context(mapping);
      return hubfs::NotFound(mapping + ", and " + tree->name() + "/" + *resolved + " has no dataset '" + m.dataset +
                             "' (libhdf5 would read fill values)");
    }
  }
  return Status::Ok();
}

std::vector<std::string> missing_virtual_sources(hid_t file, hid_t dataset, hid_t dcpl, const std::string& file_path) {
  std::vector<std::string> missing;
  // The folder libhdf5 calls the file's "extpath": the name it was opened with, made absolute.
  std::string folder;
  if (const size_t slash = file_path.rfind('/'); slash != std::string::npos) folder = file_path.substr(0, slash + 1);
  if (file_path.empty() || file_path[0] != '/') {
    std::vector<char> cwd(PATH_MAX + 1);
    if (::getcwd(cwd.data(), cwd.size())) folder = std::string(cwd.data()) + "/" + folder;
  }
  std::string dapl_prefix;
  if (Hid dapl(H5Dget_access_plist(dataset)); dapl.valid()) {
    const ssize_t n = H5Pget_virtual_prefix(dapl.get(), nullptr, 0);
    if (n > 0) {
      std::string s(static_cast<size_t>(n) + 1, '\0');
      H5Pget_virtual_prefix(dapl.get(), s.data(), s.size());
      s.resize(static_cast<size_t>(n));
      dapl_prefix = s;
    }
  }
  auto join = [](const std::string& prefix, const std::string& name) {
    return prefix.empty() || prefix.back() == '/' ? prefix + name : prefix + "/" + name;
  };
  std::map<std::string, std::string> found;  // the name a mapping gives -> the file libhdf5 opens ("" none)
  for (const Mapping& m : virtual_mappings(dcpl)) {
    if (is_pattern(m.file) || is_pattern(m.dataset)) continue;
    const std::string source = m.file + ":" + m.dataset;
    if (m.file == ".") {
      if (!dataset_exists(file, m.dataset)) missing.push_back(source + " (no such dataset)");
      continue;
    }
    auto it = found.find(m.file);
    if (it == found.end()) {
      // libhdf5's order (H5F_prefix_open_file); after an absolute name fails, the rest try its
      // last component.
      std::vector<std::string> candidates;
      std::string name = m.file;
      if (name[0] == '/') {
        candidates.push_back(name);
        name = name.substr(name.rfind('/') + 1);
      }
      if (const char* env = std::getenv("HDF5_VDS_PREFIX")) {
        std::string list = env;
        for (size_t at = 0; at <= list.size();) {
          size_t end = list.find(':', at);
          if (end == std::string::npos) end = list.size();
          if (end > at) candidates.push_back(join(list.substr(at, end - at), name));
          at = end + 1;
        }
      }
      if (!dapl_prefix.empty()) candidates.push_back(join(dapl_prefix, name));
      candidates.push_back(join(folder, name));
      candidates.push_back(name);
      std::string hit;
      for (const std::string& c : candidates) {
        if (H5Fis_hdf5(c.c_str()) > 0) {
          hit = c;
          break;
        }
      }
      it = found.emplace(m.file, hit).first;
    }
    if (it->second.empty()) {
      missing.push_back(source + " (no such file)");
      continue;
    }
    Hid src(H5Fopen(it->second.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!src.valid() || !dataset_exists(src.get(), m.dataset)) missing.push_back(source + " (no such dataset)");
  }
  return missing;
}

hubfs::Result<size_t> ExternalSegments::pread(void* dst, uint64_t offset, size_t len, const std::atomic<bool>* cancel) {
  auto* out = static_cast<uint8_t*>(dst);
  const size_t want = static_cast<size_t>(std::min<uint64_t>(len, offset < size_ ? size_ - offset : 0));
  size_t done = 0;
  uint64_t start = 0;  // the logical offset segment i starts at
  for (const Segment& s : segments_) {
    if (done == want) break;
    const uint64_t at = offset + done;
    const bool unlimited = s.size == H5F_UNLIMITED;
    if (!unlimited && at >= start + s.size) {
      start += s.size;
      continue;
    }
    const uint64_t skip = at - start;
    const uint64_t left = unlimited ? UINT64_MAX : s.size - skip;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(want - done, left));
    auto file_at = checked_add(s.offset, skip);
    if (!file_at) return hubfs::Corrupt(name_ + ": external segment '" + s.path + "' lies past 2^64 bytes");
    size_t got = 0;
    while (got < n) {
      auto r = s.file->pread(out + done + got, *file_at + got, n - got, cancel);
      if (!r.ok()) return r.status();
      if (*r == 0) break;
      got += *r;
    }
    std::memset(out + done + got, 0, n - got);  // past the end of a short file: zeros, as libhdf5
    done += n;
    if (unlimited) break;
    start += s.size;
  }
  if (done < want) {
    return hubfs::Corrupt(name_ + ": its external segments end at byte " + std::to_string(offset + done) +
                          ", before the dataset's " + std::to_string(size_) + " bytes");
  }
  return done;
}

void ExternalSegments::hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  // One hint per file, in its own offsets: the part of each range each segment holds.
  std::map<ByteSource*, std::vector<std::pair<uint64_t, uint64_t>>> per_file;
  for (const auto& [offset, length] : ranges) {
    uint64_t start = 0;
    for (const Segment& s : segments_) {
      const bool unlimited = s.size == H5F_UNLIMITED;
      const uint64_t end = unlimited ? UINT64_MAX : start + s.size;
      const uint64_t lo = std::max(offset, start);
      const uint64_t hi = std::min(end, offset + length);
      if (lo < hi) {
        if (auto file_at = checked_add(s.offset, lo - start)) per_file[s.file.get()].push_back({*file_at, hi - lo});
      }
      if (unlimited) break;
      start = end;
    }
  }
  for (auto& [file, r] : per_file) file->hint(r);
}

hubfs::Result<std::shared_ptr<ExternalSegments>> open_external_segments(hid_t dcpl, uint64_t nbytes,
                                                                        const std::shared_ptr<SourceLink>& link,
                                                                        const std::string& home,
                                                                        const std::string& where) {
  const std::shared_ptr<FileTree> tree = link->tree();
  if (!tree) return hubfs::IoError(where + " is stored in external files, " + std::string(kNoTreeFix));
  const int count = H5Pget_external_count(dcpl);
  std::vector<ExternalSegments::Segment> segments;
  std::map<std::string, std::shared_ptr<ByteSource>> files;
  for (int i = 0; i < count; ++i) {
    std::vector<char> name(PATH_MAX + 1, '\0');  // a longer name would not open locally either
    off_t offset = 0;
    hsize_t size = 0;
    if (H5Pget_external(dcpl, static_cast<unsigned>(i), name.size() - 1, name.data(), &offset, &size) < 0) {
      return hubfs::Corrupt(where + ": its external file list cannot be read: " + hdf5_error_text());
    }
    const std::string raw(name.data());
    const std::string segment = where + ": its external segment " + std::to_string(i) + " ('" + raw + "')";
    auto resolved = resolve_in_tree(home, raw);
    if (!resolved.ok()) {
      return hubfs::IoError(segment + " lies outside " + tree->name() + " (" + resolved.status().message() +
                            "); h5chunk reads only files of the same repo for an hf:// file, never a local one");
    }
    auto it = files.find(*resolved);
    if (it == files.end()) {
      auto opened = tree->open(*resolved);
      if (!opened.ok()) {
        return Status(opened.status().code(), segment + ": " + tree->name() + "/" + *resolved +
                                                  " cannot be opened: " + opened.status().message());
      }
      it = files.emplace(*resolved, std::move(opened).value()).first;
    }
    if (offset < 0) return hubfs::Corrupt(segment + " starts at a negative offset");
    segments.push_back({*resolved, static_cast<uint64_t>(offset), size, it->second});
  }
  return std::make_shared<ExternalSegments>(link->name() + " (external storage of " + where + ")", nbytes,
                                            std::move(segments));
}

}  // namespace h5chunk
